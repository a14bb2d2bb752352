"""BFCL's data: where its files are, how a single-turn category becomes task payloads, and the fixed split.

**Fixed seed / evaluation split.** Seeds come from BFCL's single-turn Python categories (non-live and live,
incl. irrelevance). An item is a *seed* (split ``train``) iff ``int(sha256("bfcl/" + id)[:16], 16) % 100 <
TRAIN_PERCENT`` (30); every other item is in split ``eval`` and is never shown to the simulator. The rule depends
only on the item id, so it is the same on every machine and for every run; the BFCL benchmark evaluator scores
the ``eval`` split by default (the multi-turn items are never seeds). Seeds whose function docs exceed
``MAX_SEED_DOC_CHARS`` are left out of ``train`` (they do not fit the simulator prompt of a small model); they
do not move to ``eval``, so the two splits never overlap whatever the size rule.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from genenv.domains.base import DataMissingError

TRAIN_PERCENT = 30
"""Share (percent) of BFCL single-turn items used as seeds; the rest is the evaluation split."""
SEED_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
)
MAX_SEED_DOC_CHARS = 4_000


def split_of(item_id: str) -> str:
    """'train' (seed) or 'eval' for a BFCL item id — the fixed rule documented above."""
    digest = hashlib.sha256(f"bfcl/{item_id}".encode()).hexdigest()
    return "train" if int(digest[:16], 16) % 100 < TRAIN_PERCENT else "eval"


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def bfcl_dir(benchmarks_dir: Path | None) -> Path:
    """The BFCL data folder: ``<benchmarks>/bfcl``, else the data the ``bfcl-eval`` package ships; or
    DataMissingError naming both places."""
    candidates: list[Path] = []
    if benchmarks_dir is not None:
        candidates.append(Path(benchmarks_dir) / "bfcl")
    # Located without importing it: importing bfcl_eval pulls in its whole model-handler stack.
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(next(iter(spec.submodule_search_locations))) / "data")
    for root in candidates:
        if (root / "BFCL_v4_simple_python.json").is_file():
            return root
    raise DataMissingError(
        "BFCL data not found: set GENENV_PATHS__BENCHMARKS to a folder holding bfcl/ (looked in "
        f"{[str(c) for c in candidates] or 'nothing: the setting is empty'}), or "
        "`pip install --no-deps bfcl-eval==2026.3.23`, which ships the data (`genenv data fetch bfcl` copies it there)"
    )


def load_category(benchmarks_dir: Path | None, category: str) -> list[dict[str, Any]]:
    """Task payloads of one single-turn BFCL category, in file order."""
    root = bfcl_dir(benchmarks_dir)
    items = _lines(root / f"BFCL_v4_{category}.json")
    answer_file = root / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in _lines(answer_file)} if answer_file.is_file() else {}
    if "relevance" not in category and not answers:
        raise DataMissingError(f"BFCL possible answers not found: {answer_file}")
    return [
        {
            "id": item["id"],
            "category": category,
            "messages": item["question"][0],
            "functions": item["function"],
            "ground_truth": answers.get(item["id"], []),
        }
        for item in items
    ]


def in_split(payload: dict[str, Any], split: str) -> bool:
    """Whether a BFCL payload belongs to 'train' (seeds) or 'eval' (see the module docstring)."""
    if split_of(payload["id"]) != split:
        return False
    return split == "eval" or len(json.dumps(payload["functions"])) <= MAX_SEED_DOC_CHARS
