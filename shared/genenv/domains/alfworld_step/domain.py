"""ALFWorld as single steps: given the goal, what happened so far and the admissible commands, the next expert action.

Data: ``<benchmarks>/alfworld`` holds the 140 valid_seen and 134 valid_unseen games (``games_index.jsonl`` with
each game's expert walkthrough). A step is (goal, history of (action, observation), current observation,
admissible commands) → expert action. Observations and admissible commands only exist once the walkthrough is
replayed in TextWorld; :mod:`genenv.domains.alfworld_step.benchmark` does that (optional ``alfworld`` extra) and
caches the derived steps as JSONL. Without that cache a step carries the goal (read from the game's grammar) and the
previous expert actions only — protocol ``walkthrough_only``, labelled as such wherever it is reported.

Split: the ALFWorld train games are not in the local data. ``load_seeds("train")`` therefore uses valid_seen
(in-distribution) and ``load_seeds("eval")`` valid_unseen, the paper's out-of-distribution split, which never
seeds the simulator. A ``json_2.1.1/train`` folder, when present, is used for "train" instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

from genenv.checkers.base import run_checker
from genenv.contracts.rollouts import Verdict
from genenv.contracts.tasks import ChatMessage, RejectionReason, Seed
from genenv.domains.alfworld_step.checker import MAX_ACTION_CHARS, VERBS, canonical_action, check_action
from genenv.domains.base import DataMissingError, Domain, TaskRejected

SPLITS = ("valid_seen", "valid_unseen")
PROTOCOL_REPLAY = "textworld_replay"
PROTOCOL_WALKTHROUGH = "walkthrough_only"
CACHE_VERSION = 1
MAX_HISTORY_STEPS = 8
"""Prompt keeps the last this-many (action, observation) pairs (SmolLM2 serves 2,048 tokens)."""
MAX_OBSERVATION_CHARS = 1_500
MAX_ADMISSIBLE = 80

_GOAL = re.compile(r"Your task is to: ([^\"\\]+?)\s*\"")

SYSTEM_PROMPT = (
    "You are an agent in a text-based household environment (ALFWorld). Reply with exactly one command from "
    "the admissible commands, e.g. 'go to desk 1' or 'take mug 1 from desk 1', and nothing else."
)


def alfworld_dir(benchmarks_dir: Path | None) -> Path:
    """The ALFWorld data folder, or DataMissingError."""
    if benchmarks_dir is None:
        raise DataMissingError("ALFWorld needs settings.paths.benchmarks (folder with alfworld/)")
    root = Path(benchmarks_dir) / "alfworld"
    if not (root / "games_index.jsonl").is_file():
        raise DataMissingError(
            f"ALFWorld data not found: expected {root / 'games_index.jsonl'}; fetch it with `genenv data fetch "
            "alfworld` or set GENENV_PATHS__BENCHMARKS to a folder holding alfworld/"
        )
    return root


def load_games(benchmarks_dir: Path | None, split: str) -> list[dict[str, Any]]:
    """Index rows (game_file, task_type, walkthrough, ...) of one split, in file order."""
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; use one of {SPLITS}")
    root = alfworld_dir(benchmarks_dir)
    with (root / "games_index.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [r for r in rows if r["split"] == split]


def read_goal(game_path: Path) -> str:
    """The templated goal ('put a mug in the coffeemachine') from a game file's grammar."""
    grammar = json.loads(game_path.read_text(encoding="utf-8"))["grammar"]
    match = _GOAL.search(grammar)
    if match is None:
        raise DataMissingError(f"no 'Your task is to:' goal in the grammar of {game_path}")
    return match.group(1).rstrip(".")


def default_cache_dir() -> Path:
    """``settings.paths.home / "cache"``: where derived benchmark data is kept."""
    from genenv.settings import get_settings

    return get_settings().paths.home / "cache"


def cache_path(cache_dir: Path, split: str) -> Path:
    """Where the TextWorld-derived steps of a split are cached."""
    return cache_dir / "alfworld" / f"steps-{split}-v{CACHE_VERSION}.jsonl"


def read_cache(path: Path) -> dict[str, dict[str, Any]]:
    """Cached replayed games by game_file (empty when the cache does not exist)."""
    if not path.is_file():
        return {}
    games: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                game = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line a concurrent builder is still writing: that game counts as not cached
            games[game["game_file"]] = game
    return games


def step_payloads(
    game: dict[str, Any], replayed: dict[str, Any] | None, goal: str | None = None
) -> list[dict[str, Any]]:
    """One task payload per expert action of a game (replayed observations when available)."""
    walkthrough: list[str] = game["walkthrough"]
    base = {"game_file": game["game_file"], "split": game["split"], "task_type": game["task_type"]}
    payloads: list[dict[str, Any]] = []
    if replayed is not None:
        steps = replayed["steps"]
        for t, step in enumerate(steps):
            history = [
                {"action": steps[i]["expert_action"], "observation": steps[i + 1]["observation"]} for i in range(t)
            ]
            payloads.append(
                {
                    **base,
                    "protocol": PROTOCOL_REPLAY,
                    "goal": replayed["goal"],
                    "step": t,
                    "initial_observation": steps[0]["observation"],
                    "history": history,
                    "admissible_commands": step["admissible_commands"],
                    "expert_action": step["expert_action"],
                }
            )
        return payloads
    if goal is None:
        raise ValueError("walkthrough-only steps need the goal text")
    for t, action in enumerate(walkthrough):
        payloads.append(
            {
                **base,
                "protocol": PROTOCOL_WALKTHROUGH,
                "goal": goal,
                "step": t,
                "initial_observation": None,
                "history": [{"action": a, "observation": None} for a in walkthrough[:t]],
                "admissible_commands": None,
                "expert_action": action,
            }
        )
    return payloads


def load_steps(
    benchmarks_dir: Path | None, split: str, cache_dir: Path | None = None, *, require_replay: bool = False
) -> list[dict[str, Any]]:
    """All single-step tasks of a split: replayed ones from the cache, else walkthrough-only ones."""
    root = alfworld_dir(benchmarks_dir)
    games = load_games(benchmarks_dir, split)
    cached = read_cache(cache_path(cache_dir, split)) if cache_dir is not None else {}
    payloads: list[dict[str, Any]] = []
    for game in games:
        replayed = cached.get(game["game_file"])
        if replayed is None and require_replay:
            raise DataMissingError(
                f"no TextWorld replay cached for {game['game_file']}; run `genenv bench evaluate alfworld` with the "
                "alfworld extra installed (it builds the cache)"
            )
        goal = None if replayed is not None else read_goal(root / game["game_file"])
        payloads.extend(step_payloads(game, replayed, goal))
    return payloads


def _clip(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_step(task: dict[str, Any]) -> str:
    """The user message of one step."""
    lines: list[str] = []
    if task.get("initial_observation"):
        lines.append(_clip(str(task["initial_observation"])))
    else:
        lines.append(f"Your task is to: {task['goal']}.")
    history = list(task.get("history") or [])
    if len(history) > MAX_HISTORY_STEPS:
        lines.append(f"(... {len(history) - MAX_HISTORY_STEPS} earlier steps omitted ...)")
        history = history[-MAX_HISTORY_STEPS:]
    for h in history:
        lines.append(f"> {h['action']}")
        if h.get("observation"):
            lines.append(_clip(str(h["observation"])))
    admissible = task.get("admissible_commands")
    if admissible:
        lines.append("Admissible commands: " + ", ".join(admissible[:MAX_ADMISSIBLE]))
    lines.append("What is your next command?")
    return "\n".join(lines)


class AlfworldStepDomain(Domain):
    """Single-step expert-action prediction in ALFWorld."""

    name: ClassVar[str] = "alfworld_step"
    group_field: ClassVar[str | None] = "task_type"
    default_success_threshold: ClassVar[float] = 1.0

    def __init__(self, cache_dir: Path | None = None) -> None:
        # Replay cache folder; None = settings.paths.home / "cache", read at call time.
        self.cache_dir = cache_dir

    def load_seeds(self, benchmarks_dir: Path | None, split: str = "train") -> list[Seed]:
        """'train' = valid_seen steps (no train games locally), 'eval' = valid_unseen steps."""
        if split not in {"train", "eval"}:
            raise ValueError(f"unknown split {split!r}; use 'train' or 'eval'")
        source = "valid_seen" if split == "train" else "valid_unseen"
        return [
            Seed(id=f"alfworld-{p['split']}-{_game_id(p['game_file'])}-s{p['step']:02d}", domain=self.name, payload=p)
            for p in load_steps(benchmarks_dir, source, self.cache_dir or default_cache_dir())
        ]

    def simulator_messages(
        self, seed: Seed | None, n: int, *, target_success: float | None, stats: tuple[int, int] | None
    ) -> list[ChatMessage]:
        """Ask for one new household step: goal, observation, admissible commands and the correct next command."""
        system = (
            "You write single-step tasks for a household agent in ALFWorld. Reply with JSON only: "
            '{"goal": ..., "observation": ..., "admissible_commands": [...], "expert_action": ...}. '
            "The expert_action must be one of the admissible_commands and be the best next command for the goal."
        )
        if seed is None:
            user = "Write one new task."
        else:
            p = seed.payload
            example = {
                "goal": p.get("goal"),
                "observation": _last_observation(p),
                "admissible_commands": (p.get("admissible_commands") or [])[:20],
                "expert_action": p.get("expert_action"),
            }
            user = f"Example task: {json.dumps(example)}\nWrite one NEW task that varies the example."
        if stats is not None and stats[1] > 0 and target_success is not None:
            k, m = stats
            user += f" The agent solved {k} of {m} recent attempts; aim for a success rate of {target_success:.0%}."
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def task_json_schema(self) -> dict[str, Any]:
        """Goal, observation, admissible commands and the expert action."""
        return {
            "type": "object",
            "properties": {
                "goal": {"type": "string", "minLength": 3, "maxLength": 200},
                "observation": {"type": "string", "maxLength": MAX_OBSERVATION_CHARS},
                "admissible_commands": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 2, "maxLength": MAX_ACTION_CHARS},
                    "minItems": 1,
                    "maxItems": MAX_ADMISSIBLE,
                },
                "expert_action": {"type": "string", "minLength": 2, "maxLength": MAX_ACTION_CHARS},
            },
            "required": ["goal", "observation", "admissible_commands", "expert_action"],
            "additionalProperties": False,
        }

    def validate_generation(self, obj: dict[str, Any], seed: Seed | None) -> dict[str, Any]:
        """A step payload whose expert action is an admissible ALFWorld command, or TaskRejected."""
        if not isinstance(obj, dict):
            raise TaskRejected(RejectionReason.SCHEMA, "expected an object")
        goal, obs, admissible, expert = (
            obj.get("goal"),
            obj.get("observation"),
            obj.get("admissible_commands"),
            obj.get("expert_action"),
        )
        if not isinstance(goal, str) or not isinstance(obs, str) or not isinstance(expert, str):
            raise TaskRejected(RejectionReason.SCHEMA, "goal, observation and expert_action must be strings")
        if not isinstance(admissible, list) or not all(isinstance(a, str) for a in admissible):
            raise TaskRejected(RejectionReason.SCHEMA, "admissible_commands must be a list of strings")
        if not goal.strip() or not expert.strip() or not admissible:
            raise TaskRejected(RejectionReason.EMPTY, "empty goal, expert action or command list")
        if len(obs) > MAX_OBSERVATION_CHARS or len(admissible) > MAX_ADMISSIBLE:
            raise TaskRejected(RejectionReason.TOO_LONG, "observation or command list too long")
        commands = [canonical_action(a) for a in admissible]
        bad = [a for a in commands if not a or a.split(" ", 1)[0] not in VERBS or len(a) > MAX_ACTION_CHARS]
        if bad:
            raise TaskRejected(RejectionReason.INVALID_TASK, f"not ALFWorld commands: {bad[:3]}")
        action = canonical_action(expert)
        if action not in commands:
            raise TaskRejected(RejectionReason.INVALID_TASK, "expert_action is not among the admissible commands")
        return self.reject_if_seed({
            "protocol": "generated",
            "goal": goal.strip().rstrip("."),
            "step": 0,
            "initial_observation": obs.strip() or None,
            "history": [],
            "admissible_commands": list(dict.fromkeys(commands)),
            "expert_action": action,
            "task_type": (seed.payload.get("task_type") if seed is not None else None),
        }, seed)

    def canonical_task(self, payload: dict[str, Any]) -> str:
        """Goal, the observation the agent acts on and the expert action, each in canonical form."""
        goal = " ".join(str(payload.get("goal", "")).lower().rstrip(".").split())
        observation = " ".join(_last_observation(payload).split())
        return json.dumps([goal, observation, canonical_action(str(payload.get("expert_action", "")))])

    def agent_messages(self, task: dict[str, Any]) -> list[ChatMessage]:
        """System instructions plus the rendered step."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": render_step(task)}]

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        """Exact match of the canonical command against the expert action."""
        threshold = self.default_success_threshold if success_threshold is None else success_threshold
        return run_checker(
            lambda: check_action(
                response, str(task.get("expert_action") or ""), threshold, task.get("admissible_commands")
            )
        )


def _last_observation(payload: dict[str, Any]) -> str:
    history = payload.get("history") or []
    if history and history[-1].get("observation"):
        return str(history[-1]["observation"])
    return str(payload.get("initial_observation") or f"Your task is to: {payload.get('goal')}.")


def _game_id(game_file: str) -> str:
    """``<task dir>/<trial>`` of a game file path, a stable id."""
    parts = Path(game_file).parts
    return "/".join(parts[-3:-1])


DOMAIN = AlfworldStepDomain()
