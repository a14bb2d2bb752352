"""Data-defined domains: a user's seed file and a kind make a task family, without code."""
