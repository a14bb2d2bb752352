"""Hot-loading each role's LoRA adapters into what serves it (a vLLM server, or the in-process local backend).

Kept apart from :mod:`genenv.inference` because publishing records what is served in the database: the inference
backends themselves depend only on contracts, settings, models and hardware, so the domains and the benchmark
harness can build on them.
"""
