"""TravelPlanner plans: the 8 commonsense and 5 hard constraints of the official evaluator, checked offline.

A re-implementation of upstream ``evaluation/commonsense_constraint.py`` and ``hard_constraint.py``
(OSU-NLP-Group/TravelPlanner) over an in-memory :class:`TravelDatabase`. The database loader lives in
:mod:`genenv.domains.travel_plan.domain`; everything here is pure. Upstream's lookups are reproduced exactly: a
restaurant/attraction/hotel exists when the plan's name is a *substring* of a database name in that city (first
match in file order after pandas' ``dropna``), costs come from that first match, flights are matched by number.

Upstream quirks kept on purpose, so that scores equal the official evaluator's:

- Within Current City: for a day without ``from``, upstream iterates over the *characters* of the city name
  (``extract_before_parenthesis`` returns a string there), so meals/attractions pass when they share any
  character with it, and the hotel must contain the city's last character;
- Room Rule: upstream compares the query's rule with the misspelt ``'parities'``, so a "parties" rule never fails;
- Cuisine: a meal in the origin city skips the remaining meals of that day (``continue`` in the day loop);
- Diverse Attractions / attraction lookups use ``split(';')[:-1]``: an attraction not followed by ``;`` is ignored;
- Minimum Nights Stay only applies when exactly one database row matches the hotel name.

Differences (documented in docs/benchmarks.md): where upstream raises (unparseable transport text, a day dict
without ``current_city``) the affected constraint fails here instead of crashing the whole evaluation; and
Reasonable City Route is counted in the commonsense micro rate (upstream's ``eval.py`` looks it up under a
misspelt key and so never counts it).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS, CheckFailure, valid_verdict
from genenv.contracts.rollouts import Verdict, VerdictErrorKind

COMMONSENSE = (
    "Within Sandbox",
    "Complete Information",
    "Within Current City",
    "Reasonable City Route",
    "Diverse Restaurants",
    "Diverse Attractions",
    "Non-conf. Transportation",
    "Minimum Nights Stay",
)
HARD = ("Budget", "Room Rule", "Room Type", "Cuisine", "Transportation")
PLAN_KEYS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
MAX_PLAN_DAYS = 30
MAX_FIELD_CHARS = 2_000
"""Longest day field accepted: the upstream regexes run on every field and are quadratic in its length."""
PLACEHOLDER_DAY = "You don't need to fill in the information for this or later days."

_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_BEFORE_PAREN = re.compile(r"^(.*?)\([^)]*\)")
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")


# --- database ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Restaurant:
    """One restaurant row."""

    name: str
    city: str
    cuisines: str
    cost: float


@dataclass(frozen=True, slots=True)
class Accommodation:
    """One accommodation row."""

    name: str
    city: str
    price: float
    room_type: str
    house_rules: str
    minimum_nights: float
    maximum_occupancy: float


@dataclass(frozen=True, slots=True)
class Flight:
    """One flight row."""

    number: str
    price: float
    origin: str
    dest: str
    date: str


@dataclass
class TravelDatabase:
    """The sandbox: rows grouped by city in file order, distances, flights and the city → state map."""

    restaurants: dict[str, list[Restaurant]] = field(default_factory=dict)
    accommodations: dict[str, list[Accommodation]] = field(default_factory=dict)
    attractions: dict[str, list[str]] = field(default_factory=dict)
    distances: dict[tuple[str, str], tuple[str | None, str | None]] = field(default_factory=dict)
    flights: dict[str, list[Flight]] = field(default_factory=dict)
    city_state: dict[str, str] = field(default_factory=dict)

    def add_flights(self, flights: Iterable[Flight]) -> None:
        """Index flights by number (first row of a number wins for the price, as with upstream's ``.values[0]``)."""
        for f in flights:
            rows = self.flights.setdefault(f.number, [])
            if f not in rows:
                rows.append(f)

    def restaurant(self, name: str, city: str) -> Restaurant | None:
        """First restaurant in ``city`` whose name contains ``name``."""
        return next((r for r in self.restaurants.get(city, ()) if name in r.name), None)

    def accommodation_matches(self, name: str, city: str) -> list[Accommodation]:
        """All accommodations in ``city`` whose name contains ``name``."""
        return [a for a in self.accommodations.get(city, ()) if name in a.name]

    def has_attraction(self, name: str, city: str) -> bool:
        """Whether an attraction in ``city`` has a name containing ``name``."""
        return any(name in a for a in self.attractions.get(city, ()))

    def ground_cost(self, origin: str, dest: str, mode: str) -> int | None:
        """Upstream ``run_for_evaluation``: 5 % of the km for self-driving, the km for a taxi, None if unknown."""
        entry = self.distances.get((before_parenthesis(origin), before_parenthesis(dest)))
        if entry is None:
            return None
        duration, distance = entry
        if duration is None or distance is None or "day" in duration:
            return None
        km = float(distance.replace("km", "").replace(",", ""))
        return int(km * 0.05) if "driving" in mode else int(km)


def with_task_flights(db: TravelDatabase, flights: Iterable[Flight]) -> TravelDatabase:
    """A view of ``db`` whose flight table also holds the task's own flights (copy only when there are some)."""
    extra = list(flights)
    if not extra:
        return db
    merged = TravelDatabase(
        restaurants=db.restaurants,
        accommodations=db.accommodations,
        attractions=db.attractions,
        distances=db.distances,
        flights={k: list(v) for k, v in db.flights.items()},
        city_state=db.city_state,
    )
    merged.add_flights(extra)
    return merged


# --- query and plan ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TravelQuery:
    """The structured fields of one TravelPlanner query."""

    org: str
    dest: str
    days: int
    visiting_city_number: int
    people_number: int
    budget: float
    local_constraint: dict[str, Any]
    level: str = ""

    @classmethod
    def from_payload(cls, task: Mapping[str, Any]) -> TravelQuery:
        """Build from a task payload (CheckFailure task_error when fields are missing or malformed)."""
        try:
            lc = task.get("local_constraint") or {}
            return cls(
                org=str(task["org"]),
                dest=str(task["dest"]),
                days=int(task["days"]),
                visiting_city_number=int(task["visiting_city_number"]),
                people_number=int(task["people_number"]),
                budget=float(task["budget"]),
                local_constraint={k: lc.get(k) for k in ("house rule", "cuisine", "room type", "transportation")},
                level=str(task.get("level") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckFailure(VerdictErrorKind.TASK_ERROR, f"travel task lacks a structured field: {exc}") from None


def parse_plan(text: str, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> list[dict[str, Any]]:
    """The plan in a response: a JSON (or Python-literal) list of day objects; raises CheckFailure."""
    if len(text) > max_chars:
        raise CheckFailure(VerdictErrorKind.TOO_LARGE, f"response has {len(text)} characters (limit {max_chars})")
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end <= start:
        truncated = start != -1
        raise CheckFailure(
            VerdictErrorKind.PARSE_ERROR, "plan list is not closed (truncated)" if truncated else "no plan list found"
        )
    body = text[start : end + 1]
    try:
        obj: Any = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        try:
            obj = ast.literal_eval(body)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise CheckFailure(VerdictErrorKind.PARSE_ERROR, "plan is neither JSON nor a Python literal") from None
    if not isinstance(obj, list) or not all(isinstance(d, dict) for d in obj):
        raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, "plan must be a list of day objects")
    if len(obj) > MAX_PLAN_DAYS:
        raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, f"plan has more than {MAX_PLAN_DAYS} days")
    plan: list[dict[str, Any]] = []
    for day in obj:
        clean: dict[str, Any] = {}
        for key, value in day.items():
            if not isinstance(key, str):
                raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, "day keys must be strings")
            if value is None:
                value = ""
            elif isinstance(value, bool) or not isinstance(value, str | int | float):
                raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, f"day field {key!r} must be text")
            elif isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
                raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, f"day field {key!r} is longer than {MAX_FIELD_CHARS}")
            clean[key] = value if key == "days" or isinstance(value, str) else str(value)
        plan.append(clean)
    if not any(plan):
        raise CheckFailure(VerdictErrorKind.SCHEMA_ERROR, "plan has no filled day")
    return plan


# --- upstream helpers ---------------------------------------------------------------------------------------------


class _Unparseable(Exception):
    """Upstream would raise here; the constraint being checked fails instead."""


def before_parenthesis(s: str) -> str:
    """``extract_before_parenthesis``: the text before the first ``(...)`` group."""
    m = _BEFORE_PAREN.search(s)
    return m.group(1) if m else s


def _bp(s: str | None) -> str:
    if s is None:
        raise _Unparseable
    return before_parenthesis(s)


def extract_from_to(text: str) -> tuple[str | None, str | None]:
    """``from A to B`` → (A, B), or (None, None)."""
    m = _FROM_TO.search(text)
    return (m.group(1), m.group(2)) if m else (None, None)


def name_city(info: str) -> tuple[str, str]:
    """``get_valid_name_city``: 'Name, City' → (name, city); ('-', '-') when unparseable."""
    m = _NAME_CITY.search(info)
    if m is None:
        return "-", "-"
    return m.group(1).strip(), before_parenthesis(m.group(2).strip()).strip()


def _filled(value: Any) -> bool:
    return bool(value) and value != "-"


def _s(unit: Mapping[str, Any], key: str) -> str:
    value = unit.get(key, "")
    return value if isinstance(value, str) else str(value)


def _days(query: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> range:
    return range(min(query.days, len(plan)))


def _transport_kind(text: str) -> str | None:
    low = text.lower()
    if "taxi" in low:
        return "Taxi"
    if "self-driving" in low:
        return "Self-driving"
    if "flight" in low:
        return "Flight"
    return None


def _valid_city_sequence(cities: list[str]) -> bool:
    if len(cities) < 3:
        return False
    visited: set[str] = set()
    i = 0
    while i < len(cities):
        city = cities[i]
        if city in visited and i not in (0, len(cities) - 1):
            return False
        count = 0
        while i < len(cities) and cities[i] == city:
            count += 1
            i += 1
        if count == 1 and 0 < i - 1 < len(cities) - 1:
            return False
        visited.add(city)
    return True


# --- the 8 commonsense constraints -----------------------------------------------------------------------------


def reasonable_city_route(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool:
    """Reasonable City Route: starts at the origin, closed loop, each city visited in one stretch, in the state."""
    cities: list[str] = []
    for i in _days(q, plan):
        value = _s(plan[i], "current_city")
        if "from" in value:
            c1, c2 = extract_from_to(value)
            c1, c2 = _bp(c1), _bp(c2)
            if i == 0 and c1 != q.org:
                return False
            cities += [c1, c2]
        else:
            cities.append(before_parenthesis(value))
    if not cities or cities[0] != cities[-1] or not _valid_city_sequence(cities):
        return False
    for idx, city in enumerate(cities):
        if city not in db.city_state:
            return False
        if idx not in (0, len(cities) - 1) and q.days > 3 and db.city_state[city] != q.dest:
            return False
    return True


def diverse_restaurants(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    """Diverse Restaurants: no restaurant is used twice."""
    seen: set[str] = set()
    for i in _days(q, plan):
        for meal in ("breakfast", "lunch", "dinner"):
            value = plan[i].get(meal)
            if _filled(value):
                if value in seen:
                    return False
                seen.add(str(value))
    return True


def diverse_attractions(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    """Diverse Attractions: no attraction is visited twice."""
    seen: set[str] = set()
    for i in _days(q, plan):
        value = plan[i].get("attraction")
        if _filled(value):
            for attraction in str(value).split(";")[:-1]:
                if attraction in seen:
                    return False
                seen.add(attraction)
    return True


def minimum_nights(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool:
    """Minimum Nights Stay: consecutive nights in a hotel reach its minimum (when exactly one row matches)."""
    stays: list[str] = []
    for i in _days(q, plan):
        if "accommodation" not in plan[i]:
            return False
        stays.append(_s(plan[i], "accommodation"))
    groups: list[tuple[str, int]] = []
    for value in stays:
        if groups and groups[-1][0] == value:
            groups[-1] = (value, groups[-1][1] + 1)
        else:
            groups.append((value, 1))
    for value, nights in groups:
        if value not in ("-", ""):
            matches = db.accommodation_matches(*name_city(value))
            if len(matches) == 1 and nights < matches[0].minimum_nights:
                return False
    return True


def non_conflicting_transportation(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    """Non-conf. Transportation: day 1 has transport; no self-driving together with flights or taxis."""
    if not plan or not _filled(plan[0].get("transportation")):
        return False
    kinds = {_transport_kind(_s(plan[0], "transportation"))}
    for i in _days(q, plan):
        if _filled(plan[i].get("transportation")):
            kinds.add(_transport_kind(_s(plan[i], "transportation")))
    return not ("Self-driving" in kinds and ("Flight" in kinds or "Taxi" in kinds))


def within_current_city(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    """Within Current City: every item of a day names one of that day's cities (upstream's string semantics)."""
    for i in _days(q, plan):
        unit = plan[i]
        current = _s(unit, "current_city")
        # Upstream: a list of two cities on travel days, but the bare city *string* otherwise (iterated by char).
        cities: Sequence[str]
        if "from" in current:
            c1, c2 = extract_from_to(current)
            cities = [_bp(c1), _bp(c2)]
        else:
            cities = before_parenthesis(current)
        if _filled(unit.get("transportation")):
            transport = _s(unit, "transportation")
            if any(city not in transport for city in cities):
                return False
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit.get(meal)) and not any(city in _s(unit, meal) for city in cities):
                return False
        if _filled(unit.get("attraction")):
            for attraction in _s(unit, "attraction").split(";")[:-1]:
                if not any(city in attraction for city in cities):
                    return False
        hotel = unit.get("accommodation")
        if _filled(hotel) and (not cities or cities[-1] not in _s(unit, "accommodation")):
            return False
    return True


def within_sandbox(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool:
    """Within Sandbox: every flight, drive, restaurant, attraction and hotel exists in the database."""
    for i in _days(q, plan):
        unit = plan[i]
        transport = _s(unit, "transportation")
        if _filled(transport):
            org, dest = extract_from_to(transport)
            if org is None or dest is None:
                org, dest = extract_from_to(_s(unit, "current_city"))
            if "flight number" in transport.lower():
                parts = transport.split("Flight Number: ")
                if len(parts) < 2:
                    return False
                number = parts[1].split(",")[0]
                o, d = _bp(org), _bp(dest)
                if not any(f.origin == o and f.dest == d for f in db.flights.get(number, ())):
                    return False
            elif "self-driving" in transport.lower() or "taxi" in transport.lower():
                o, d = (before_parenthesis(org), before_parenthesis(dest)) if org and dest else ("-", "-")
                mode = "self-driving" if "self-driving" in transport.lower() else "taxi"
                if db.ground_cost(o, d, mode) is None:
                    return False
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit.get(meal)) and db.restaurant(*name_city(_s(unit, meal))) is None:
                return False
        if _filled(unit.get("attraction")):
            for attraction in _s(unit, "attraction").split(";")[:-1]:
                if not db.has_attraction(*name_city(attraction)):
                    return False
        if _filled(unit.get("accommodation")) and not db.accommodation_matches(*name_city(_s(unit, "accommodation"))):
            return False
    return True


def _valid_days(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    filled = sum(1 for i in _days(q, plan) if plan[i] and plan[i].get("current_city") != PLACEHOLDER_DAY)
    return filled == q.days


def _valid_city_number(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    cities: set[str] = set()
    for i in _days(q, plan):
        value = _s(plan[i], "current_city")
        if "from" in value:
            c1, c2 = extract_from_to(value)
            c1, c2 = _bp(c1), _bp(c2)
            if i == 0 and c1 != q.org:
                return False
            cities |= {c1, c2}
        else:
            cities.add(before_parenthesis(value))
    cities.discard(q.org)
    return len(cities) == q.visiting_city_number


def complete_information(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool:
    """Complete Information: right number of days and cities, required items present, ≤ 50 % absent."""
    if not _valid_days(q, plan) or not _valid_city_number(q, plan):
        return False
    total = 0
    for i in _days(q, plan):
        unit = plan[i]
        if any(key not in unit for key in PLAN_KEYS[2:]):
            return False
        current = _s(unit, "current_city")
        travel_day = "from " in current
        if (travel_day or "to " in current) and unit["transportation"] in ("", "-"):
            return False
        if not travel_day and " to " not in current and unit["attraction"] in ("", "-"):
            return False
        if i != q.days - 1 and unit["accommodation"] in ("", "-"):
            return False
        if any(unit[m] in ("", "-") for m in ("breakfast", "lunch", "dinner")) and not travel_day:
            return False
        total += sum(1 for value in unit.values() if value and value != "-")
    return total / (6 * q.days) >= 0.5


def _guard(check: Any, *args: Any) -> bool:
    try:
        return bool(check(*args))
    except _Unparseable:
        return False


def commonsense(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> dict[str, bool]:
    """The 8 commonsense constraints, by their paper names."""
    return {
        "Within Sandbox": _guard(within_sandbox, q, plan, db),
        "Complete Information": _guard(complete_information, q, plan),
        "Within Current City": _guard(within_current_city, q, plan),
        "Reasonable City Route": _guard(reasonable_city_route, q, plan, db),
        "Diverse Restaurants": _guard(diverse_restaurants, q, plan),
        "Diverse Attractions": _guard(diverse_attractions, q, plan),
        "Non-conf. Transportation": _guard(non_conflicting_transportation, q, plan),
        "Minimum Nights Stay": _guard(minimum_nights, q, plan, db),
    }


# --- the 5 hard constraints ---------------------------------------------------------------------------------------


def total_cost(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> float:
    """Upstream ``get_total_cost``: flights × people, cars per 5 / taxis per 4 people, meals × people, rooms."""
    cost = 0.0
    for i in _days(q, plan):
        unit = plan[i]
        transport = _s(unit, "transportation")
        if _filled(transport):
            org, dest = extract_from_to(transport)
            if org is None or dest is None:
                org, dest = extract_from_to(_s(unit, "current_city"))
            if org is not None and dest is not None:
                if "flight number" in transport.lower():
                    parts = transport.split("Flight Number: ")
                    flights = db.flights.get(parts[1].split(",")[0], []) if len(parts) > 1 else []
                    if flights:
                        cost += flights[0].price * q.people_number
                elif "self-driving" in transport.lower():
                    cost += (db.ground_cost(org, dest, "self-driving") or 0) * math.ceil(q.people_number / 5)
                elif "taxi" in transport.lower():
                    cost += (db.ground_cost(org, dest, "taxi") or 0) * math.ceil(q.people_number / 4)
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit.get(meal)):
                r = db.restaurant(*name_city(_s(unit, meal)))
                if r is not None:
                    cost += r.cost * q.people_number
        if _filled(unit.get("accommodation")):
            matches = db.accommodation_matches(*name_city(_s(unit, "accommodation")))
            if matches:
                cost += matches[0].price * math.ceil(q.people_number / matches[0].maximum_occupancy)
    return cost


_RULE_TEXT = {
    "smoking": "No smoking",
    "parities": "No parties",  # upstream's spelling: a query rule "parties" never matches it
    "children under 10": "No children under 10",
    "visitors": "No visitors",
    "pets": "No pets",
}
_ROOM_TYPE = {"shared room": "Shared room", "private room": "Private room", "entire room": "Entire home/apt"}


def _hotels(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> Iterable[Accommodation]:
    for i in _days(q, plan):
        if _filled(plan[i].get("accommodation")):
            matches = db.accommodation_matches(*name_city(_s(plan[i], "accommodation")))
            if matches:
                yield matches[0]


def room_rule(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool | None:
    """Room Rule: no hotel forbids what the query asks for (None when the query has no rule)."""
    rule = q.local_constraint.get("house rule")
    if rule is None:
        return None
    forbidden = _RULE_TEXT.get(str(rule))
    return not any(forbidden is not None and forbidden in h.house_rules for h in _hotels(q, plan, db))


def room_type(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool | None:
    """Room Type: every hotel has the requested room type (None when the query has none)."""
    wanted = q.local_constraint.get("room type")
    if wanted is None:
        return None
    for h in _hotels(q, plan, db):
        if wanted == "not shared room":
            if h.room_type == "Shared room":
                return False
        elif wanted in _ROOM_TYPE and h.room_type != _ROOM_TYPE[wanted]:
            return False
    return True


def cuisine(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> bool | None:
    """Cuisine: every requested cuisine is served by some meal outside the origin city (None when not asked)."""
    wanted = q.local_constraint.get("cuisine")
    if not wanted:
        return None
    found: set[str] = set()
    for i in _days(q, plan):
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(plan[i].get(meal)):
                name, city = name_city(_s(plan[i], meal))
                if city == q.org:
                    break  # upstream `continue`s the day loop: the day's later meals are skipped
                r = db.restaurant(name, city)
                if r is not None:
                    found |= {c for c in wanted if c in r.cuisines}
    return len(found) == len(wanted)


def transportation_rule(q: TravelQuery, plan: Sequence[Mapping[str, Any]]) -> bool | None:
    """Transportation: no flight / no self-driving as requested (None when not asked)."""
    rule = q.local_constraint.get("transportation")
    if rule is None:
        return None
    for i in _days(q, plan):
        value = _s(plan[i], "transportation")
        if _filled(value):
            if rule == "no flight" and "Flight" in value:
                return False
            if rule == "no self-driving" and "Self-driving" in value:
                return False
    return True


def hard(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> dict[str, bool | None]:
    """The 5 hard constraints (None = not applicable to this query)."""
    return {
        "Budget": total_cost(q, plan, db) <= q.budget,
        "Room Rule": room_rule(q, plan, db),
        "Room Type": room_type(q, plan, db),
        "Cuisine": cuisine(q, plan, db),
        "Transportation": transportation_rule(q, plan),
    }


# --- R_agent -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanResult:
    """Constraint outcomes of one plan; ``hard`` is None when the plan is incomplete or leaves the sandbox."""

    commonsense: dict[str, bool]
    hard: dict[str, bool | None] | None

    @property
    def commonsense_pass(self) -> bool:
        """All 8 commonsense constraints hold."""
        return all(self.commonsense.values())

    @property
    def hard_pass(self) -> bool:
        """Hard constraints were checked and none failed."""
        return self.hard is not None and all(v is not False for v in self.hard.values())

    @property
    def final_pass(self) -> bool:
        """Both of the above (the Final Pass Rate's unit)."""
        return self.commonsense_pass and self.hard_pass


def evaluate_plan(q: TravelQuery, plan: Sequence[Mapping[str, Any]], db: TravelDatabase) -> PlanResult:
    """Commonsense constraints always; hard ones only after Complete Information and Within Sandbox (upstream)."""
    cs = commonsense(q, plan, db)
    hd = hard(q, plan, db) if cs["Complete Information"] and cs["Within Sandbox"] else None
    return PlanResult(commonsense=cs, hard=hd)


def applicable_hard(q: TravelQuery) -> int:
    """Hard constraints that apply to a query: Budget plus each non-null local constraint."""
    return 1 + sum(
        q.local_constraint.get(k) is not None for k in ("house rule", "cuisine", "room type", "transportation")
    )


def check_plan(response: str, task: Mapping[str, Any], db: TravelDatabase, threshold: float) -> Verdict:
    """R_agent of a plan: the share of applicable constraints passed (1.0 = passes the Final Pass Rate)."""
    q = TravelQuery.from_payload(task)
    flights = [Flight(**f) for f in task.get("flights") or []]
    plan = parse_plan(response)
    result = evaluate_plan(q, plan, with_task_flights(db, flights))
    passed = sum(result.commonsense.values())
    if result.hard is not None:
        passed += sum(v is True for v in result.hard.values())
    score = passed / (len(COMMONSENSE) + applicable_hard(q))
    details: dict[str, Any] = {
        "commonsense": result.commonsense,
        "hard": result.hard,
        "commonsense_pass": result.commonsense_pass,
        "hard_pass": result.hard_pass,
        "final_pass": result.final_pass,
    }
    return valid_verdict(score, threshold, details)
