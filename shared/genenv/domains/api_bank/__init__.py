"""API-Bank: ``domain`` (levels 1-3 data, prompts, task schema, validation), ``checker`` (API-request parsing
and judging) and ``benchmark`` (the ``api_bank`` evaluator)."""
