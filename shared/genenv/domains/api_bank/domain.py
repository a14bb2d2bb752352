"""API-Bank: given the API descriptions and the dialogue so far, write the next API request.

Evaluation items are the level-1 (399, all APIs described) and level-2 (135, only ToolSearcher described at
first) API-call samples of ``test-data/``. Each is joined with its source dialogue
(``lv1-lv2-samples/<level dir>/<file>``, sample id as upstream's ``Sample.from_chat_history`` numbers them) to
get the gold call's recorded result (output/exception), which the checker replays; the parameter types of
every API come from the API descriptions found in the data (prompts and ToolSearcher results).

Split: API-Bank's training dialogues are not in the local data. The simulator is seeded from the 245
level-3 single-step samples (``level-3-batch-inf.json``: other APIs, other dialogues), so no level-1/2
evaluation item ever seeds it; ``load_seeds("eval")`` returns the level-1 and level-2 items.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import CheckFailure, run_checker
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.api_bank.checker import ApiCall, GoldCall, check_api_bank, judge_call, parse_api_request, type_name
from genenv.domains.base import DataMissingError, Domain, TaskRejected

LEVELS = {
    "level-1": ("level-1-api.json", "level-1-given-desc"),
    "level-2": ("level-2-api.json", "level-2-toolsearcher"),
}
MAX_DIALOGUE_CHARS = 6_000
MAX_APIS = 8

INSTRUCTION = (
    "\nGenerate an API request in the format of [ApiName(key1='value1', key2='value2', ...)] based on the previous "
    "dialogue context.\nThe current year is 2023.\nInput: \nUser: User's utterence\nAI: AI's response\n\n"
    "Expected output:\nAPI-Request: [ApiName(key1='value1', key2='value2', ...)]\n\nAPI descriptions:\n"
)
"""Upstream's level-1/2 instruction header (the API descriptions follow, one JSON object per line)."""


def api_bank_dir(benchmarks_dir: Path | None) -> Path:
    """The API-Bank data folder, or DataMissingError."""
    if benchmarks_dir is None:
        raise DataMissingError("API-Bank needs settings.paths.benchmarks (folder with api_bank/)")
    root = Path(benchmarks_dir) / "api_bank"
    if not (root / "test-data").is_dir() or not (root / "lv1-lv2-samples").is_dir():
        raise DataMissingError(
            f"API-Bank data not found under {root} (test-data/ and lv1-lv2-samples/); fetch it with `genenv data "
            "fetch api_bank` or set GENENV_PATHS__BENCHMARKS to a folder holding api_bank/"
        )
    return root


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DataMissingError(f"API-Bank file missing: {path}")
    return json.loads(path.read_text(encoding="utf-8"))


def _collect_specs(value: Any, specs: dict[str, dict[str, str]]) -> None:
    if isinstance(value, list):
        for v in value:
            _collect_specs(v, specs)
    elif (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("input_parameters"), dict)
    ):
        specs.setdefault(value["name"], {k: str(v.get("type", "str")) for k, v in value["input_parameters"].items()})


@functools.lru_cache(maxsize=4)
def api_catalogue(root: Path) -> dict[str, dict[str, str]]:
    """Declared input parameter types of every API described anywhere in the level-1/2 data."""
    specs: dict[str, dict[str, str]] = {}
    for file_name, _ in LEVELS.values():
        for item in _read_json(root / "test-data" / file_name):
            for line in (item["instruction"] + "\n" + item["input"]).splitlines():
                line = line.strip()
                if line.startswith("{"):
                    try:
                        _collect_specs(json.loads(line), specs)
                    except json.JSONDecodeError:
                        continue
    for _, dialog_dir in LEVELS.values():
        for path in sorted((root / "lv1-lv2-samples" / dialog_dir).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                turn = json.loads(line)
                if turn.get("role") == "API" and turn.get("api_name") == "ToolSearcher":
                    _collect_specs((turn.get("result") or {}).get("output"), specs)
    return specs


def _samples(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ground-truth turns numbered as upstream's ``Sample.from_chat_history`` does (API turn, then the next turn)."""
    out: list[dict[str, Any]] = []
    for i, turn in enumerate(history):
        if turn["role"] == "API":
            out.append(turn)
            out.append(history[i + 1] if i + 1 < len(history) else {"role": "END"})
    return out


def load_level(benchmarks_dir: Path | None, level: str) -> list[dict[str, Any]]:
    """The API-call samples of one level as task payloads, in file order."""
    root = api_bank_dir(benchmarks_dir)
    file_name, dialog_dir = LEVELS[level]
    specs = api_catalogue(root.resolve())
    dialogs: dict[str, list[dict[str, Any]]] = {}
    payloads: list[dict[str, Any]] = []
    for item in _read_json(root / "test-data" / file_name):
        if item["file"] not in dialogs:
            path = root / "lv1-lv2-samples" / dialog_dir / item["file"]
            if not path.is_file():
                raise DataMissingError(f"API-Bank dialogue missing: {path}")
            dialogs[item["file"]] = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        gold_turn = _samples(dialogs[item["file"]])[item["id"]]
        if gold_turn.get("role") != "API":
            raise DataMissingError(f"{item['file']} sample {item['id']} is not an API call")
        result = gold_turn.get("result") or {}
        name = gold_turn["api_name"]
        payloads.append(
            {
                "level": level,
                "source": {"file": item["file"], "id": item["id"]},
                "instruction": item["instruction"],
                "dialogue": item["input"],
                "expected_output": item["expected_output"],
                "gold": {
                    "api_name": name,
                    "arguments": gold_turn["param_dict"],
                    "parameters": specs.get(name) or {k: type_name(v) for k, v in gold_turn["param_dict"].items()},
                    "output": result.get("output"),
                    "exception": result.get("exception"),
                },
            }
        )
    return payloads


def load_level3_seeds(benchmarks_dir: Path | None) -> list[dict[str, Any]]:
    """The 245 level-3 single-step samples as payloads (gold parsed from the expected request)."""
    root = api_bank_dir(benchmarks_dir)
    payloads: list[dict[str, Any]] = []
    for i, item in enumerate(_read_json(root / "test-data" / "level-3-batch-inf.json")):
        try:
            call = parse_api_request(item["output"])
        except CheckFailure:
            continue
        payloads.append(
            {
                "level": "level-3",
                "source": {"sample_id": item["sample_id"], "api_id": item["api_id"], "index": i},
                "instruction": item["instruction"],
                "dialogue": item["input"],
                "expected_output": item["output"],
                "gold": {
                    "api_name": call.name,
                    "arguments": call.args,
                    "parameters": {k: type_name(v) for k, v in call.args.items()},
                },
            }
        )
    return payloads


def _describe(apis: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(a, ensure_ascii=False) for a in apis)


class ApiBankDomain(Domain):
    """API-Bank call generation, scored with API-Bank's per-API correctness rules."""

    name: ClassVar[str] = "api_bank"
    group_field: ClassVar[str | None] = "level"
    default_success_threshold: ClassVar[float] = 1.0

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """'train' = level-3 single-step samples; 'eval' = level-1 and level-2 API-call samples."""
        if split == "train":
            return [
                Seed(id=f"apibank-l3-{p['source']['index']:03d}", domain=self.name, payload=p)
                for p in load_level3_seeds(benchmarks_dir)
            ]
        if split == "eval":
            return [
                Seed(id=f"apibank-{p['level']}-{i:03d}", domain=self.name, payload=p)
                for level in LEVELS
                for i, p in enumerate(load_level(benchmarks_dir, level))
            ]
        raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for one new (APIs, dialogue, gold request) triple in API-Bank's format."""
        system = (
            "You write test cases for an assistant that calls APIs. Reply with JSON only: "
            '{"apis": [{"name": ..., "description": ..., "input_parameters": {"<param>": {"type": "str|int|float|'
            'bool|list", "description": ...}}}], "dialogue": "User: ...\\nAI: ...\\nUser: ...", '
            '"api_request": "[ApiName(key=\'value\', ...)]"}. The api_request must call one of the apis with '
            "values stated in the dialogue."
        )
        if seed is None:
            user = "Write one new test case."
        else:
            p = seed.payload
            example = {"dialogue": str(p.get("dialogue", ""))[-1500:], "api_request": p.get("expected_output")}
            user = f"Example: {json.dumps(example)}\nWrite one NEW test case of the same kind with other values."
        if stats is not None and stats[1] > 0 and target_success is not None:
            user += f" The assistant solved {stats[0]} of {stats[1]} recent attempts; aim for {target_success:.0%}."
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def task_json_schema(self) -> dict[str, Any]:
        """API descriptions, the dialogue and the gold request."""
        param = {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["str", "int", "float", "bool", "list"]},
                "description": {"type": "string", "maxLength": 300},
            },
            "required": ["type"],
        }
        return {
            "type": "object",
            "properties": {
                "apis": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_APIS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "pattern": r"^[A-Za-z_]\w{0,63}$"},
                            "description": {"type": "string", "maxLength": 500},
                            "input_parameters": {"type": "object", "additionalProperties": param},
                        },
                        "required": ["name", "description", "input_parameters"],
                    },
                },
                "dialogue": {"type": "string", "minLength": 5, "maxLength": MAX_DIALOGUE_CHARS},
                "api_request": {"type": "string", "minLength": 4, "maxLength": 2000},
            },
            "required": ["apis", "dialogue", "api_request"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A payload whose gold request parses and matches its own API description, or TaskRejected."""
        if not isinstance(obj, dict):
            raise TaskRejected(RejectionReason.SCHEMA, "expected an object")
        apis, dialogue, request = obj.get("apis"), obj.get("dialogue"), obj.get("api_request")
        if not isinstance(apis, list) or not apis or not all(isinstance(a, dict) for a in apis):
            raise TaskRejected(RejectionReason.SCHEMA, "apis must be a non-empty list of objects")
        if not isinstance(dialogue, str) or not isinstance(request, str):
            raise TaskRejected(RejectionReason.SCHEMA, "dialogue and api_request must be strings")
        if not dialogue.strip():
            raise TaskRejected(RejectionReason.EMPTY, "empty dialogue")
        if len(dialogue) > MAX_DIALOGUE_CHARS or len(apis) > MAX_APIS:
            raise TaskRejected(RejectionReason.TOO_LONG, "dialogue or API list too long")
        specs: dict[str, dict[str, str]] = {}
        for api in apis:
            params = api.get("input_parameters")
            if not isinstance(api.get("name"), str) or not isinstance(params, dict):
                raise TaskRejected(RejectionReason.SCHEMA, "each api needs a name and input_parameters")
            specs[api["name"]] = {
                k: str(v.get("type", "str")) if isinstance(v, dict) else "str" for k, v in params.items()
            }
        try:
            call = parse_api_request(request)
        except CheckFailure as exc:
            raise TaskRejected(RejectionReason.INVALID_TASK, f"api_request does not parse: {exc.message}") from None
        if call.name not in specs:
            raise TaskRejected(RejectionReason.INVALID_TASK, f"api_request calls {call.name}, which is not described")
        gold = GoldCall(name=call.name, args=call.args, parameters=specs[call.name], required=tuple(specs[call.name]))
        judgement = judge_call(ApiCall(call.name, dict(call.args)), gold)
        if not judgement.correct:
            raise TaskRejected(RejectionReason.INVALID_TASK, f"api_request does not fit its API: {judgement.reason}")
        turns = dialogue.strip()
        if not turns.rstrip().endswith("Generate API Request:"):
            turns += "\nGenerate API Request:\n"
        return self.reject_if_seed({
            "level": "generated",
            "instruction": INSTRUCTION + _describe(apis),
            "dialogue": turns,
            "expected_output": f"API-Request: {request.strip()}",
            "gold": {
                "api_name": call.name,
                "arguments": call.args,
                "parameters": specs[call.name],
                "required": list(specs[call.name]),
            },
        }, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """The dialogue and the gold request, whitespace-normalised (the API descriptions may be re-worded)."""
        dialogue = str(payload.get("dialogue", "")).replace("Generate API Request:", "")
        return json.dumps([" ".join(dialogue.split()), " ".join(str(payload.get("expected_output", "")).split())])

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """Upstream's instruction (with API descriptions) as system prompt, the dialogue as user turn."""
        return [
            {"role": "system", "content": str(task["instruction"]).strip()},
            {"role": "user", "content": str(task["dialogue"])},
        ]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """1 when the first API request in the response matches the gold call under API-Bank's rules."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        return run_checker(lambda: check_api_bank(response, task.get("gold") or {}, threshold))


DOMAIN = ApiBankDomain()
