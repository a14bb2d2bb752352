"""GenEnv: difficulty-aligned co-evolution of an LLM agent and an LLM environment simulator."""

__version__ = "0.1.0"
