"""TravelPlanner, sole-planning setting: given the query and its reference information, write the day-by-day plan.

Data (``<benchmarks>/travelplanner``, see its README): the 180 validation queries with structured fields and
reference information (``validation.csv``), the database CSVs, and a flights table derived from the validation
rows' reference information. R_agent is the share of applicable constraints the plan passes (8 commonsense +
Budget + each local constraint); 1.0 means it passes the Final Pass Rate, hence the default threshold of 1.0.

Split: seeds come from the 45 TravelPlanner **train** queries (``train_sft_std_travelplanner.jsonl`` with
``train_ref_info.jsonl``); their structured fields are not in the local data (HF ``train.csv``), so they are
derived from the query text and the annotated plan (:func:`derive_train_fields`, checked by a test: every
annotated plan passes every constraint). Their flights travel with each task (``flights``), because the
flights table covers only the validation reference information. The 180 validation queries are the
evaluation split and never seed the simulator.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import functools
import json
import re
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.base import DataMissingError, Domain, TaskRejected
from genenv.domains.travel_plan.checker import (
    Accommodation,
    Flight,
    Restaurant,
    TravelDatabase,
    check_plan,
    extract_from_to,
)

# pandas.read_csv's default NA strings: upstream drops every row holding one of them (``.dropna()``).
_NA = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)
CUISINES = ("American", "Chinese", "French", "Italian", "Mediterranean", "Mexican", "Indian")
MAX_REFERENCE_CHARS = 60_000
"""Reference information longer than this is cut in the agent prompt (validation rows average ≈27k characters)."""

SYSTEM_PROMPT = (
    "You are a proficient planner. Based on the provided information and query, give a detailed travel plan, "
    "including specifics such as flight numbers (e.g., F0123456), restaurant names and accommodation names. All "
    "information in the plan must come from the provided data and align with commonsense. '-' marks information "
    "that is not needed (e.g. nothing after returning to the departure city). When you travel between two cities "
    "in one day, write the current city as 'from A to B'.\n"
    "Reply with a JSON list with one object per day and exactly these keys: days, current_city, transportation, "
    "breakfast, attraction, lunch, dinner, accommodation. Write items as 'Name, City'; separate attractions with "
    "';' and end each with ';'. Example day: "
    '{"days": 1, "current_city": "from Ithaca to Charlotte", "transportation": "Flight Number: F3633413, from '
    'Ithaca to Charlotte, Departure Time: 05:38, Arrival Time: 07:46", "breakfast": "Nagaland\'s Kitchen, '
    'Charlotte", "attraction": "The Charlotte Museum of History, Charlotte;", "lunch": "Cafe Maple Street, '
    'Charlotte", "dinner": "Bombay Vada Pav, Charlotte", "accommodation": "Affordable Spacious Refurbished Room '
    'in Bushwick!, Charlotte"}'
)


def travel_dir(benchmarks_dir: Path | None) -> Path:
    """The TravelPlanner data folder, or DataMissingError."""
    if benchmarks_dir is None:
        raise DataMissingError("TravelPlanner needs settings.paths.benchmarks (folder with travelplanner/)")
    root = Path(benchmarks_dir) / "travelplanner"
    if not (root / "validation.csv").is_file() or not (root / "database").is_dir():
        raise DataMissingError(
            f"TravelPlanner data not found under {root} (validation.csv and database/); fetch it with "
            "`genenv data fetch travelplanner` or set GENENV_PATHS__BENCHMARKS to a folder holding travelplanner/"
        )
    return root


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.is_file():
        raise DataMissingError(f"TravelPlanner database file missing: {path}")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        return header, list(reader)


def _complete(header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
    """Rows without any NA cell (pandas ``dropna()`` over all columns), as dicts."""
    return [dict(zip(header, r, strict=True)) for r in rows if len(r) == len(header) and not any(v in _NA for v in r)]


@functools.lru_cache(maxsize=4)
def load_database(root: Path) -> TravelDatabase:
    """The sandbox database of ``<benchmarks>/travelplanner`` (read once per process)."""
    db_dir = root / "database"
    db = TravelDatabase()
    for r in _complete(*_rows(db_dir / "restaurants" / "clean_restaurant_2022.csv")):
        db.restaurants.setdefault(r["City"], []).append(
            Restaurant(name=r["Name"], city=r["City"], cuisines=r["Cuisines"], cost=float(r["Average Cost"]))
        )
    for r in _complete(*_rows(db_dir / "accommodations" / "clean_accommodations_2022.csv")):
        db.accommodations.setdefault(r["city"], []).append(
            Accommodation(
                name=r["NAME"],
                city=r["city"],
                price=float(r["price"]),
                room_type=r["room type"],
                house_rules=r["house_rules"],
                minimum_nights=float(r["minimum nights"]),
                maximum_occupancy=float(r["maximum occupancy"]),
            )
        )
    for r in _complete(*_rows(db_dir / "attractions" / "attractions.csv")):
        db.attractions.setdefault(r["City"], []).append(r["Name"])
    header, rows = _rows(db_dir / "googleDistanceMatrix" / "distance.csv")
    for row in rows:
        d = dict(zip(header, row, strict=False))
        key = (d["origin"], d["destination"])
        if key not in db.distances:  # upstream reads the first matching row
            duration = None if d["duration"] in _NA else d["duration"]
            distance = None if d["distance"] in _NA else d["distance"]
            db.distances[key] = (duration, distance)
    db.add_flights(
        Flight(
            number=r["Flight Number"],
            price=float(r["Price"]),
            origin=r["OriginCityName"],
            dest=r["DestCityName"],
            date=r["FlightDate"],
        )
        for r in _complete(*_rows(db_dir / "flights_from_validation_reference.csv"))
    )
    states = db_dir / "background" / "citySet_with_states.txt"
    if not states.is_file():
        raise DataMissingError(f"TravelPlanner city/state list missing: {states}")
    for line in states.read_text(encoding="utf-8").splitlines():
        if "\t" in line:
            city, state = line.split("\t", 1)
            db.city_state[city] = state
    return db


def load_validation(benchmarks_dir: Path | None) -> list[dict[str, Any]]:
    """The 180 validation queries as task payloads (structured fields + reference information), in file order."""
    root = travel_dir(benchmarks_dir)
    csv.field_size_limit(64 * 1024 * 1024)
    with (root / "validation.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [
        {
            "idx": i + 1,
            "query": r["query"],
            "org": r["org"],
            "dest": r["dest"],
            "days": int(r["days"]),
            "visiting_city_number": int(r["visiting_city_number"]),
            "date": ast.literal_eval(r["date"]),
            "people_number": int(r["people_number"]),
            "local_constraint": ast.literal_eval(r["local_constraint"]),
            "budget": float(r["budget"]),
            "level": r["level"],
            "reference_information": r["reference_information"],
        }
        for i, r in enumerate(rows)
    ]


# --- train seeds: structured fields derived from the query text and the annotated plan ---------------------------

_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_N = r"(\d+|one|two|three|four|five|six|seven|eight)"
_PEOPLE = (
    re.compile(rf"(?:group|party) of {_N}\b", re.IGNORECASE),
    re.compile(rf"\b{_N}\s+(?:people|persons?|individuals)\b", re.IGNORECASE),
    re.compile(rf"\bfor {_N}\b(?!\s*(?:-?\s*days?|weeks?))", re.IGNORECASE),
)
_HOUSE_RULES = (
    (r"smok", "smoking"),
    (r"\bparties\b", "parties"),
    (r"children under", "children under 10"),
    (r"\bpets?\b|pet-friendly", "pets"),
    (r"\bvisitors\b", "visitors"),
)
_DATE = re.compile(r"March\s+(\d+)(?:st|nd|rd|th)|(\d+)(?:st|nd|rd|th)\s+of\s+March")


def derive_train_fields(query: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    """Structured TravelPlanner fields of a train query, read from its text and its annotated plan."""
    days = sum(1 for d in plan if d)
    first = str(plan[0].get("current_city", ""))
    org, arrival = extract_from_to(first)
    if org is None or arrival is None:
        raise ValueError(f"first day does not say 'from A to B': {first!r}")
    state = re.search(r"\(([^)]+)\)", arrival)
    dest = state.group(1) if (days > 3 and state) else arrival.strip()
    low = query.lower()
    people = 2 if re.search(r"\bpair\b", low) else 1
    for pattern in _PEOPLE:
        m = pattern.search(query)
        if m is not None:
            token = m.group(1).lower()
            people = int(token) if token.isdigit() else _WORD_NUMBERS[token]
            break
    budget = re.search(r"\$([\d,]+)", query)
    if budget is None:
        raise ValueError("no budget in the query")
    start = _DATE.search(query)
    if start is None:
        raise ValueError("no March start date in the query")
    day0 = dt.date(2022, 3, int(start.group(1) or start.group(2)))
    house = next((rule for pattern, rule in _HOUSE_RULES if re.search(pattern, low)), None)
    room = next((t for t in ("not shared room", "shared room", "private room", "entire room") if t in low), None)
    transport = None
    negation = r"(?:\b(?:not|no|avoid|without)\b|n't|\bnon-)[^.]*?"
    if re.search(negation + r"(?:self-driv|self-drive|drive ourselves)", low):
        transport = "no self-driving"
    elif re.search(negation + r"(?:flight|flying|\bfly\b)", low):
        transport = "no flight"
    cuisine = [c for c in CUISINES if c in query] or None
    return {
        "org": org.strip(),
        "dest": dest,
        "days": days,
        "visiting_city_number": {3: 1, 5: 2, 7: 3}.get(days, 1),
        "date": [(day0 + dt.timedelta(days=i)).isoformat() for i in range(days)],
        "people_number": people,
        "local_constraint": {"house rule": house, "cuisine": cuisine, "room type": room, "transportation": transport},
        "budget": float(budget.group(1).replace(",", "")),
        "level": "train",
    }


def load_train(benchmarks_dir: Path | None) -> list[dict[str, Any]]:
    """The 45 train queries as payloads: derived fields, reference information, their flights and the gold plan."""
    root = travel_dir(benchmarks_dir)
    sft_path, ref_path = (
        root / "queries" / "train_sft_std_travelplanner.jsonl",
        root / "queries" / "train_ref_info.jsonl",
    )
    if not sft_path.is_file() or not ref_path.is_file():
        raise DataMissingError(f"TravelPlanner train files missing under {root / 'queries'}")
    sft = [json.loads(line) for line in sft_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    refs = [json.loads(line) for line in ref_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    payloads: list[dict[str, Any]] = []
    for i, (example, ref) in enumerate(zip(sft, refs, strict=True)):
        messages = example["messages"]
        query = messages[1]["content"].rsplit("Query:", 1)[-1].strip()
        plan = [d for d in ast.literal_eval(messages[2]["content"]) if d]
        flights = [
            {
                "number": f["Flight Number"],
                "price": float(f["Price"]),
                "origin": f["OriginCityName"],
                "dest": f["DestCityName"],
                "date": f["FlightDate"],
            }
            for key, records in ref.items()
            if key.startswith("Flight from") and isinstance(records, list)
            for f in records
        ]
        payloads.append(
            {
                "idx": i + 1,
                "query": query,
                **derive_train_fields(query, plan),
                "reference_information": json.dumps(
                    [{"Description": k, "Content": v} for k, v in ref.items()], ensure_ascii=False
                ),
                "flights": flights,
                "gold_plan": plan,
            }
        )
    return payloads


def render_task(task: dict[str, Any]) -> str:
    """The user message: reference information, then the query."""
    info = str(task.get("reference_information") or "")
    if len(info) > MAX_REFERENCE_CHARS:
        info = info[:MAX_REFERENCE_CHARS] + " ...(truncated)"
    return f"Given information: {info}\nQuery: {task['query']}\nTravel Plan (JSON list):"


class TravelPlanDomain(Domain):
    """TravelPlanner sole-planning: plans checked against the local database."""

    name: ClassVar[str] = "travel_plan"
    group_field: ClassVar[str | None] = "level"
    default_success_threshold: ClassVar[float] = 1.0

    def __init__(self, benchmarks_dir: Path | None = None) -> None:
        # Database folder for verify(); None = settings.paths.benchmarks, read at first use.
        self.benchmarks_dir = benchmarks_dir

    def database(self) -> TravelDatabase:
        """The sandbox database (loaded once per process)."""
        base = self.benchmarks_dir
        if base is None:
            from genenv.settings import get_settings

            base = get_settings().paths.benchmarks
        return load_database(travel_dir(base).resolve())

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """'train' = the 45 train queries (derived fields); 'eval' = the 180 validation queries."""
        if split == "train":
            payloads = load_train(benchmarks_dir)
        elif split == "eval":
            payloads = load_validation(benchmarks_dir)
        else:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        return [Seed(id=f"travelplanner-{split}-{p['idx']:03d}", domain=self.name, payload=p) for p in payloads]

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for a variation of the seed query: same reference information, other constraints."""
        system = (
            'You write travel-planning requests. Reply with JSON only: {"query": ..., "people_number": ..., '
            '"budget": ..., "local_constraint": {"house rule": ..., "cuisine": [...], "room type": ..., '
            '"transportation": ...}}. Use null for constraints you do not set. House rules: smoking, parties, '
            "children under 10, visitors, pets. Room types: entire room, private room, shared room, not shared "
            "room. Transportation: no flight, no self-driving. Cuisines: " + ", ".join(CUISINES) + "."
        )
        if seed is None:
            user = "Write one new travel request."
        else:
            p = seed.payload
            example = {k: p.get(k) for k in ("query", "people_number", "budget", "local_constraint")}
            user = (
                f"Trip: from {p.get('org')} to {p.get('dest')}, {p.get('days')} days, dates {p.get('date')}.\n"
                f"Example request: {json.dumps(example)}\nWrite one NEW request for the same trip with a different "
                "group size, budget or constraints."
            )
        if stats is not None and stats[1] > 0 and target_success is not None:
            user += f" The planner passed {stats[0]} of {stats[1]} recent attempts; aim for {target_success:.0%}."
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def task_json_schema(self) -> dict[str, Any]:
        """Query text, group size, budget and the four local constraints."""
        nullable_str = {"anyOf": [{"type": "string"}, {"type": "null"}]}
        return {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 10, "maxLength": 1000},
                "people_number": {"type": "integer", "minimum": 1, "maximum": 8},
                "budget": {"type": "number", "minimum": 100, "maximum": 100000},
                "local_constraint": {
                    "type": "object",
                    "properties": {
                        "house rule": nullable_str,
                        "cuisine": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
                        "room type": nullable_str,
                        "transportation": nullable_str,
                    },
                    "required": ["house rule", "cuisine", "room type", "transportation"],
                    "additionalProperties": False,
                },
            },
            "required": ["query", "people_number", "budget", "local_constraint"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """The seed trip with the new request's group size, budget and constraints, or TaskRejected."""
        if seed is None:
            raise TaskRejected(
                RejectionReason.INVALID_TASK, "a travel request needs a seed trip (reference information)"
            )
        if not isinstance(obj, dict):
            raise TaskRejected(RejectionReason.SCHEMA, "expected an object")
        query, people, budget, lc = (
            obj.get("query"),
            obj.get("people_number"),
            obj.get("budget"),
            obj.get("local_constraint"),
        )
        if not isinstance(query, str) or not query.strip():
            raise TaskRejected(RejectionReason.EMPTY, "empty query")
        if not isinstance(people, int) or isinstance(people, bool) or not 1 <= people <= 8:
            raise TaskRejected(RejectionReason.SCHEMA, "people_number must be an integer in 1..8")
        if not isinstance(budget, int | float) or isinstance(budget, bool) or not 100 <= budget <= 100_000:
            raise TaskRejected(RejectionReason.SCHEMA, "budget must be a number in 100..100000")
        if not isinstance(lc, dict):
            raise TaskRejected(RejectionReason.SCHEMA, "local_constraint must be an object")
        allowed = {
            "house rule": {"smoking", "parties", "children under 10", "visitors", "pets"},
            "room type": {"entire room", "private room", "shared room", "not shared room"},
            "transportation": {"no flight", "no self-driving"},
        }
        constraint: dict[str, Any] = {}
        for key, values in allowed.items():
            value = lc.get(key)
            if value is not None and value not in values:
                raise TaskRejected(RejectionReason.INVALID_TASK, f"{key} must be one of {sorted(values)} or null")
            constraint[key] = value
        cuisine = lc.get("cuisine")
        if cuisine is not None and (not isinstance(cuisine, list) or not set(cuisine) <= set(CUISINES)):
            raise TaskRejected(RejectionReason.INVALID_TASK, f"cuisine must be a list drawn from {CUISINES} or null")
        constraint["cuisine"] = cuisine or None
        base = {k: v for k, v in seed.payload.items() if k != "gold_plan"}
        return self.reject_if_seed({
            **base,
            "query": query.strip(),
            "people_number": people,
            "budget": float(budget),
            "local_constraint": constraint,
            "level": "generated",
        }, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The request: query text, group size, budget and constraints (the reference information is the seed's)."""
        constraint = payload.get("local_constraint") or {}
        request = {
            "query": " ".join(str(payload.get("query", "")).split()),
            "people_number": payload.get("people_number"),
            "budget": float(payload.get("budget") or 0.0),
            "local_constraint": {k: v for k, v in constraint.items() if v is not None}
            if isinstance(constraint, dict) else constraint,
        }
        return json.dumps(request, sort_keys=True, default=str)

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """Planner instructions plus reference information and query."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": render_task(task)}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """Share of applicable TravelPlanner constraints the plan passes."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        db = self.database()
        return run_checker(lambda: check_plan(response, task, db, threshold))


DOMAIN = TravelPlanDomain()
