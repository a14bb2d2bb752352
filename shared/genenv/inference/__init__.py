"""Talking to language models: the OpenAI-compatible vLLM client, the local backend and the vLLM launcher
(publishing adapters to them is :mod:`genenv.serving`)."""
