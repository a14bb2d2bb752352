"""ALFWorld benchmark: single-step expert-action accuracy over valid_unseen and valid_seen.

Steps come from replaying each game's expert walkthrough in TextWorld (``alfworld`` + ``textworld[pddl]``, the
optional ``alfworld`` extra; fast-downward is compiled on install). The replay records, before every expert
action, the observation the agent sees and the admissible commands; it is run once per split and cached as
JSONL under ``settings.paths.home / "cache" / "alfworld"`` (≈3 s a game). Without the extra and without a cache
the evaluator falls back to walkthrough-only steps (goal + previous expert actions) and labels the metrics
``protocol = walkthrough_only``. Full-episode success (the agent acting in TextWorld until won or out of
steps) is not implemented.
"""

from __future__ import annotations

import fcntl
import importlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from genenv.benchmarks.base import BenchItem, Evaluator, ItemResult, RunContext
from genenv.domains.alfworld_step.domain import (
    DOMAIN,
    PROTOCOL_REPLAY,
    SPLITS,
    alfworld_dir,
    cache_path,
    default_cache_dir,
    load_games,
    load_steps,
    read_cache,
)

MAX_EPISODE_STEPS = 60
_BANNER = "-= Welcome to TextWorld, ALFRED! =-"


def textworld_available() -> bool:
    """Whether the optional TextWorld replay dependencies are importable."""
    try:
        importlib.import_module("textworld.gym")
        importlib.import_module("alfworld.agents.environment.alfred_tw_env")
    except ImportError:
        return False
    return True


def replay_game(game_path: Path, walkthrough: list[str]) -> dict[str, Any]:
    """Replay one walkthrough in TextWorld: observation and admissible commands before each expert action."""
    textworld = importlib.import_module("textworld")
    tw_gym = importlib.import_module("textworld.gym")
    wrappers = importlib.import_module("alfworld.agents.environment.alfred_tw_env")
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env_id = tw_gym.register_games(
        [str(game_path)],
        infos,
        batch_size=1,
        asynchronous=False,
        max_episode_steps=MAX_EPISODE_STEPS,
        wrappers=[wrappers.AlfredDemangler(), wrappers.AlfredInfos],
    )
    env = tw_gym.make(env_id)
    try:
        obs, info = env.reset()
        first = str(obs[0]).replace(_BANNER, "").strip()
        goal = first.rsplit("Your task is to:", 1)[-1].strip().rstrip(".")
        steps: list[dict[str, Any]] = []
        text = first
        for action in walkthrough:
            admissible = [str(a) for a in info["admissible_commands"][0]]
            steps.append(
                {
                    "observation": text,
                    "admissible_commands": admissible,
                    "expert_action": action,
                    "expert_admissible": action in admissible,
                }
            )
            obs, _score, _done, info = env.step([action])
            text = str(obs[0]).strip()
        won = bool(info["won"][0])
    finally:
        env.close()
    return {"goal": goal, "won": won, "steps": steps}


def build_cache(
    benchmarks_dir: Path, split: str, cache_dir: Path, *, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """Replay the games of a split missing from the cache, appending each as it finishes (resumable).

    An exclusive lock on ``<cache>.lock`` serialises builders: a second process waits, then finds the games cached.
    """
    root = alfworld_dir(benchmarks_dir)
    path = cache_path(cache_dir, split)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = read_cache(path)
        for game in load_games(benchmarks_dir, split)[:limit]:
            if game["game_file"] in done:
                continue
            replayed = replay_game(root / game["game_file"], list(game["walkthrough"]))
            row = {"game_file": game["game_file"], "split": split, "task_type": game["task_type"], **replayed}
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            yield row


class AlfworldEvaluator(Evaluator):
    """Single-step expert-action accuracy (valid_unseen by default, valid_seen as the other split)."""

    name: ClassVar[str] = "alfworld"
    splits: ClassVar[tuple[str, ...]] = SPLITS
    default_split: ClassVar[str] = "valid_unseen"
    headline: ClassVar[str] = "accuracy"
    max_tokens: ClassVar[int] = 24
    protocol: ClassVar[str] = (
        "every expert step of every game (walkthrough replayed in TextWorld: observation history + admissible "
        "commands shown); exact match of the canonical command against the expert action"
    )

    def __init__(self, cache_dir: Path | None = None, *, build_missing: bool = True) -> None:
        # None = settings.paths.home / "cache"; build_missing replays uncached games when TextWorld is installed.
        self.cache_dir = cache_dir
        self.build_missing = build_missing

    def load_items(self, benchmarks_dir: Path, split: str) -> list[BenchItem]:
        """All steps of a split (replaying and caching missing games first when TextWorld is available)."""
        self.check_split(split)
        cache_dir = self.cache_dir or default_cache_dir()
        if self.build_missing and textworld_available():
            for _ in build_cache(benchmarks_dir, split, cache_dir):
                pass
        return [
            BenchItem(id=f"{_game_key(p['game_file'])}/s{p['step']:02d}", category=p["task_type"], payload=p)
            for p in load_steps(benchmarks_dir, split, cache_dir)
        ]

    async def run_item(self, ctx: RunContext, item: BenchItem) -> ItemResult:
        """Ask for the next command, compare with the expert's."""
        completion = await ctx.chat(DOMAIN.agent_messages(item.payload))
        verdict = DOMAIN.verify(item.payload, completion.text)
        replayed = 1.0 if item.payload.get("protocol") == PROTOCOL_REPLAY else 0.0
        admissible = 1.0 if verdict.valid and verdict.details.get("admissible") else 0.0
        return ItemResult.of(item, verdict, completion.text, replayed=replayed, admissible=admissible)

    def summarize(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Default per-task-type table; the protocol says whether observations came from a TextWorld replay."""
        metrics = super().summarize(results)
        replayed = all(r.extra.get("replayed", 0.0) == 1.0 for r in results if r.extra)
        metrics["protocol"] = (
            self.protocol
            if replayed
            else (
                "walkthrough_only: TextWorld replay not available (install the alfworld extra); goal + previous expert "
                "actions shown, no observations or admissible commands; exact match against the expert action"
            )
        )
        metrics["replayed"] = replayed
        metrics["games"] = len({r.id.rsplit("/", 1)[0] for r in results})
        valid = [r for r in results if r.extra]
        metrics["overall"]["admissible_rate"] = (
            sum(r.extra.get("admissible", 0.0) for r in valid) / len(valid) if valid and replayed else None
        )
        return metrics


def _game_key(game_file: str) -> str:
    parts = Path(game_file).parts
    return "/".join(parts[-3:-1])


EVALUATOR = AlfworldEvaluator()
