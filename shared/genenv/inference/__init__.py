"""Talking to language models: the OpenAI-compatible vLLM client, the local backend, launch and publishing."""
