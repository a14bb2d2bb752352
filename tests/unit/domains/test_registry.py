"""The one domain registry: built-ins, plug-ins by entry point (failures listed, never fatal), data-defined tasks."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from genenv.contracts.tasks import RejectionReason, Seed
from genenv.domains import REGISTRY, domain_names, get_domain
from genenv.domains.data.domain import check_seed_file
from genenv.domains.evaluators import benchmark_names, get_evaluator
from genenv.domains.registry import ENTRY_POINT_GROUP, DomainRegistry, UnknownDomainError

FIX = "tests.unit.domains.plugin_fixtures"
BUILTINS = ["alfworld_step", "api_bank", "arithmetic", "function_calling", "qa", "travel_plan"]


def _registry(*eps: tuple[str, str]) -> DomainRegistry:
    points = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in eps]
    return DomainRegistry(entry_points=lambda: points)


def test_builtins_and_their_benchmarks_come_from_one_table() -> None:
    assert domain_names() == BUILTINS  # the test environment installs no plug-in
    assert [e.source for e in REGISTRY.entries()] == ["builtin"] * 6
    assert get_domain("arithmetic").name == "arithmetic"
    assert benchmark_names() == ["alfworld", "api_bank", "arithmetic", "bamboogle", "bfcl", "travelplanner"]
    assert get_evaluator("bfcl").name == "bfcl"
    assert REGISTRY.family("function_calling") is not None and REGISTRY.family("function_calling").benchmark == "bfcl"


def test_a_working_plugin_is_found_and_used_like_a_builtin() -> None:
    reg = _registry(("echo_math", f"{FIX}:GOOD"))
    assert reg.names() == sorted([*BUILTINS, "echo_math"])
    domain = reg.get("echo_math")
    seed = domain.load_seeds(None, "train")[0]
    assert domain.verify(seed.payload, str(seed.payload["answer"])).success
    assert next(e for e in reg.entries() if e.source == "plugin").ok


def test_broken_plugins_are_listed_with_their_reason_and_hide_nothing() -> None:
    reg = _registry(
        ("echo_math", f"{FIX}:GOOD"),
        ("missing_pkg", "genenv_no_such_package_xyz:DOMAIN"),
        ("unfinished", f"{FIX}:Unfinished"),
        ("bad_schema", f"{FIX}:BadSchema"),
        ("exploding", f"{FIX}:Exploding"),
        ("not_domain", f"{FIX}:NOT_A_DOMAIN"),
        ("renamed", f"{FIX}:GOOD"),
        ("arithmetic", f"{FIX}:GOOD"),
    )
    assert reg.names() == sorted([*BUILTINS, "echo_math"])
    failed = {e.name: e.reason or "" for e in reg.entries() if not e.ok}
    assert set(failed) == {"missing_pkg", "unfinished", "bad_schema", "exploding", "not_domain", "renamed",
                           "arithmetic"}
    assert "ModuleNotFoundError" in failed["missing_pkg"]
    assert "cannot instantiate Unfinished" in failed["unfinished"]
    assert "task_json_schema" in failed["bad_schema"]
    assert "RuntimeError: boom" in failed["exploding"]
    assert "not a genenv.domains.base.Domain" in failed["not_domain"]
    assert "calls itself 'echo_math'" in failed["renamed"]
    assert "built-in" in failed["arithmetic"]
    assert reg.get("arithmetic").name == "arithmetic"  # the built-in, not the shadowing plug-in
    with pytest.raises(UnknownDomainError, match=r"missing_pkg.*unavailable.*ModuleNotFoundError"):
        reg.get("missing_pkg")
    with pytest.raises(UnknownDomainError, match="unknown domain 'nope'"):
        reg.get("nope")


def test_unreadable_entry_points_leave_the_builtins() -> None:
    def broken() -> list[EntryPoint]:
        raise OSError("metadata unreadable")

    reg = DomainRegistry(entry_points=broken)
    assert reg.names() == BUILTINS
    assert any(not e.ok and "metadata unreadable" in (e.reason or "") for e in reg.entries())


def test_data_defined_tasks_are_scored_by_their_kind_without_the_seed_file() -> None:
    content = '{"question": "What is six times seven?", "answer": "42", "split": "train"}\n'
    domain, report = check_seed_file("my_math", "exact_answer", content, {"normalize": "number"})
    assert report.ok and domain.name == "my_math"
    payload = report.train[0].payload
    with pytest.raises(UnknownDomainError):
        REGISTRY.get("my_math")
    scorer = REGISTRY.for_task("my_math", payload)  # what the verifier does: it has no database
    assert scorer.verify(payload, "The answer is 42.").success
    assert not scorer.verify(payload, "41").success
    with pytest.raises(UnknownDomainError):
        REGISTRY.for_task("my_math", {"question": "no kind"})
    built = REGISTRY.data_domain("my_math", "exact_answer", content, {"normalize": "number"})
    assert built is REGISTRY.data_domain("my_math", "exact_answer", content, {"normalize": "number"})
    assert [s.id for s in built.load_seeds(None, "train")] == ["my_math-1"]
    rejected = pytest.raises(Exception)
    with rejected:
        built.validate_generation({"question": "What is six times seven?", "answer": "42"},
                                  Seed(id="s", domain="my_math", payload=payload))
    assert getattr(rejected.excinfo.value, "reason", None) is RejectionReason.DUPLICATE
