"""The one domain lookup of in-process helpers (genenv.catalogue) and ``genenv domains seeds``: built-in, plug-in
and data-defined domains (``genenv domains add``) alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv import catalogue
from genenv.cli.main import app
from genenv.domains import UnknownDomainError
from genenv.domains import get_domain as registry_domain

ROWS = [{"question": f"What is {n} plus {n}?", "answer": str(2 * n), "split": "eval" if n == 5 else "train"}
        for n in range(1, 6)]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder where `genenv domains add sums` registered a data-defined domain (its embedded store); the
    configured database is a file that does not exist."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GENENV_SERVICES__CONTROL_PLANE", raising=False)
    monkeypatch.setenv("GENENV_DATABASE__URL", f"sqlite:///{tmp_path / 'home' / 'genenv.db'}")
    (tmp_path / "sums.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    added = CliRunner().invoke(app, ["domains", "add", "sums", "sums.jsonl", "--kind", "exact_answer",
                                     "--normalize", "number"])
    assert added.exit_code == 0, added.output
    return tmp_path


def test_data_defined_domains_are_found_by_the_one_lookup(folder: Path) -> None:
    with pytest.raises(UnknownDomainError):
        registry_domain("sums")  # the pure registry knows built-ins and plug-ins only
    domain = catalogue.get_domain("sums")
    assert domain.name == "sums"
    seed = domain.load_seeds(None, "train")[0]
    verdict = domain.verify(seed.payload, "2")
    assert verdict.valid and verdict.success
    assert catalogue.get_domain("arithmetic") is registry_domain("arithmetic")
    # An exported task names its kind: scored without any database.
    tagged = json.loads(json.dumps(seed.payload))
    assert catalogue.get_domain("sums", tagged, stores=[]).verify(tagged, "two").success is False
    assert catalogue.get_domain("sums", tagged, stores=[]).verify(tagged, "2.0").success is True
    with pytest.raises(UnknownDomainError, match="genenv domains add"):
        catalogue.get_domain("nowhere")
    assert not (folder / "home").exists()  # a lookup never creates the configured database


def test_domains_seeds_lists_train_and_eval_ids(folder: Path) -> None:
    runner = CliRunner()
    train = runner.invoke(app, ["domains", "seeds", "sums"])
    assert train.exit_code == 0, train.output
    assert train.stdout.split() == ["sums-1", "sums-2", "sums-3", "sums-4"]
    held_out = runner.invoke(app, ["domains", "seeds", "sums", "--split", "eval", "--json"])
    assert json.loads(held_out.stdout) == {"domain": "sums", "split": "eval", "seed_ids": ["sums-5"]}
    builtin = runner.invoke(app, ["domains", "seeds", "arithmetic", "--json"])
    assert builtin.exit_code == 0, builtin.output
    ids = json.loads(builtin.stdout)["seed_ids"]
    assert ids and all(i.startswith("arith-") for i in ids)
    unknown = runner.invoke(app, ["domains", "seeds", "nowhere"])
    assert unknown.exit_code == 2 and "unknown domain 'nowhere'" in unknown.output
    assert runner.invoke(app, ["domains", "seeds", "sums", "--split", "test"]).exit_code == 2


def test_data_kinds_are_declared_once_and_each_has_its_family() -> None:
    from typing import get_args

    from genenv.contracts.domains import DATA_KINDS, DataKind
    from genenv.domains.data.domain import kind_domain
    from genenv.domains.data.seedfile import check_options

    assert DATA_KINDS == get_args(DataKind) and len(DATA_KINDS) == 3
    for kind in DATA_KINDS:
        domain = kind_domain("kinds_probe", kind, {})
        assert domain is not None and getattr(domain, "kind", None) == kind
        assert isinstance(check_options(kind, {}), dict)
    assert kind_domain("kinds_probe", "no_such_kind", {}) is None
    shown = CliRunner().invoke(app, ["domains", "add", "--help"], terminal_width=200)
    assert shown.exit_code == 0 and all(kind in shown.output for kind in DATA_KINDS), shown.output
