"""Files GenEnv derives from downloaded benchmark files (pure functions of the staged folder; byte-reproducible).

Each function reads the already-downloaded upstream files of one benchmark and returns the derived file's bytes;
the fetcher then checks them against the manifest's sha256 like any download, so a change here that alters a
derived file fails loudly instead of silently changing the data.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# alfworld's TASK_TYPES (alfworld/agents/environment/alfred_tw_env.py): the id each task family is known by.
ALFWORLD_TASK_TYPES = {
    "pick_and_place_simple": 1,
    "look_at_obj_in_light": 2,
    "pick_clean_then_place_in_recep": 3,
    "pick_heat_then_place_in_recep": 4,
    "pick_cool_then_place_in_recep": 5,
    "pick_two_obj_and_place": 6,
}
FLIGHT_COLUMNS = (
    "Flight Number",
    "Price",
    "DepTime",
    "ArrTime",
    "ActualElapsedTime",
    "FlightDate",
    "OriginCityName",
    "DestCityName",
    "Distance",
)


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def bamboogle_jsonl(root: Path) -> bytes:
    """``test.jsonl`` in FlashRAG's format from the question/answer list."""
    items = json.loads((root / "bamboogle_test_questions_and_answers.json").read_text(encoding="utf-8"))
    return _jsonl(
        [{"id": f"test_{i}", "question": x["question"], "golden_answers": [x["answer"]]} for i, x in enumerate(items)]
    )


def alfworld_index(root: Path) -> bytes:
    """``games_index.jsonl``: one row per evaluation game with its task type and expert walkthrough."""
    rows = []
    for split in ("valid_seen", "valid_unseen"):
        for path in sorted((root / "json_2.1.1" / split).glob("*/*/game.tw-pddl")):
            game = json.loads(path.read_text(encoding="utf-8"))
            task_type = path.parent.parent.name.split("-")[0]
            rows.append(
                {
                    "split": split,
                    "game_file": path.relative_to(root).as_posix(),
                    "task_type": task_type,
                    "task_type_id": ALFWORLD_TASK_TYPES[task_type],
                    "solvable": game["solvable"],
                    "walkthrough_len": len(game["walkthrough"]),
                    "walkthrough": game["walkthrough"],
                }
            )
    return _jsonl(rows)


def _flight_rows(table: str) -> list[dict[str, str]]:
    """The rows of one fixed-width flight table as pandas ``to_string`` renders it (columns right-aligned)."""
    lines = table.split("\n")
    header, ends, pos = lines[0], [], 0
    for column in FLIGHT_COLUMNS:
        pos = header.index(column, pos) + len(column)
        ends.append(pos)  # right-aligned: every cell of a column ends where its header ends
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        starts = [0, *ends[:-1]]
        rows.append({c: line[a:b].strip() for c, a, b in zip(FLIGHT_COLUMNS, starts, ends, strict=True)})
    return rows


def travelplanner_flights(root: Path) -> bytes:
    """``database/flights_from_validation_reference.csv``: every flight the validation queries' reference
    information shows (the full flights table is not public in a fetchable form), deduplicated and sorted."""
    csv.field_size_limit(sys.maxsize)  # reference_information cells are far larger than csv's default limit
    flights: dict[tuple[str, str], dict[str, str]] = {}
    with (root / "validation.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for entry in ast.literal_eval(row["reference_information"]):
                content = entry["Content"]
                if entry["Description"].startswith("Flight from") and content.lstrip().startswith("Flight Number"):
                    for flight in _flight_rows(content):
                        flights[(flight["Flight Number"], flight["FlightDate"])] = flight
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FLIGHT_COLUMNS)
    for flight in sorted(flights.values(), key=lambda f: (f["FlightDate"], f["Flight Number"])):
        writer.writerow([flight[c] for c in FLIGHT_COLUMNS])
    return out.getvalue().encode("utf-8")


DERIVATIONS: dict[str, Callable[[Path], bytes]] = {
    "bamboogle_jsonl": bamboogle_jsonl,
    "alfworld_index": alfworld_index,
    "travelplanner_flights": travelplanner_flights,
}
