"""genenv.json_safe: what the trainer stores and the reports write is strict JSON (no NaN / Infinity)."""

from __future__ import annotations

import json
import math

from genenv.json_safe import json_safe


def test_non_finite_floats_become_null_at_any_depth_and_the_rest_is_kept() -> None:
    value = {"loss": math.nan, 3: (1.5, math.inf, [-math.inf, {"ok": 2}]), "name": "v1", "flag": True}
    safe = json_safe(value)
    assert safe == {"loss": None, "3": [1.5, None, [None, {"ok": 2}]], "name": "v1", "flag": True}
    assert json.loads(json.dumps(safe, allow_nan=False)) == safe
