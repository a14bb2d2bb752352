"""Arithmetic, the CPU-sized family: ``domain`` (generated expressions, safe evaluation, the answer check on the
shared verdict builders) and ``benchmark`` (the held-out ``arithmetic`` evaluator)."""
