"""Plain data as strict JSON: non-finite floats (a diverged training step, an interval with no spread) become null,
tuples lists, mapping keys strings. Both the trainer's stored metrics and the experiment reports need it, and the
standard library's json only fails on them (allow_nan=False) or writes NaN, which is not JSON."""

from __future__ import annotations

import math
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, recursively through dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
