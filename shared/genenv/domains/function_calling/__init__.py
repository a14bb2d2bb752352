"""BFCL function calling: ``data`` (BFCL's files, the fixed seed/eval split), ``domain`` (prompts, task schema,
validation, R_agent), ``checker`` (BFCL's AST rules), ``reference`` (the official checker, loaded for the
agreement tests), ``benchmark`` (the ``bfcl`` evaluator) and ``multiturn`` (its multi-turn categories)."""
