"""Question answering (Bamboogle): ``domain`` (data, prompts, validation, token-F1 via the shared text checker)
and ``benchmark`` (the ``bamboogle`` evaluator)."""
