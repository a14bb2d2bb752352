"""``genenv domains add`` / ``list`` in embedded mode: the store in the user's GenEnv home, seen by the embedded
commands run afterwards from any folder (they copy the domain into their own database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from genenv.cli.domains import carry_data_domain
from genenv.cli.main import app
from genenv.db.engine import make_engine, make_session_factory
from genenv.db.models import DataDomainRow
from genenv.settings import GenEnvSettings

ROWS = [{"question": f"What is {n} plus {n}?", "answer": str(2 * n), "split": "eval" if n == 5 else "train"}
        for n in range(1, 6)]


def test_add_then_list_then_carry_into_an_embedded_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GENENV_SERVICES__CONTROL_PLANE", raising=False)
    monkeypatch.delenv("GENENV_URL", raising=False)
    user_home = tmp_path / "user-home"
    monkeypatch.setenv("GENENV_PATHS__HOME", str(user_home))
    store = user_home / "domains.db"
    (tmp_path / "sums.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    runner = CliRunner()
    added = runner.invoke(app, ["domains", "add", "sums", "sums.jsonl", "--kind", "exact_answer",
                                "--normalize", "number"])
    assert added.exit_code == 0, added.output
    assert added.output.strip() == "registered sums (exact_answer): 4 train rows, 1 eval rows"
    assert store.is_file()
    listed = runner.invoke(app, ["domains", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    items = json.loads(listed.output)["items"]
    assert [(i["name"], i["source"]) for i in items][-1] == ("sums", "data")
    assert items[-1]["options"] == {"normalize": "number"}
    clash = runner.invoke(app, ["domains", "add", "qa", "sums.jsonl", "--kind", "qa"])
    assert clash.exit_code == 2 and "built-in" in clash.output

    home = tmp_path / ".genenv" / "quickstart"
    home.mkdir(parents=True)
    settings = GenEnvSettings.model_validate({"database": {"url": f"sqlite:///{home / 'genenv.db'}"}})
    carry_data_domain(store, settings, "sums")
    carry_data_domain(store, settings, "sums")  # idempotent
    carry_data_domain(store, settings, "arithmetic")  # built-in: nothing to carry
    engine = make_engine(settings.database)
    try:
        with make_session_factory(engine)() as s:
            rows = list(s.scalars(select(DataDomainRow)))
    finally:
        engine.dispose()
    assert [(r.name, r.kind, r.train_rows, r.eval_rows) for r in rows] == [("sums", "exact_answer", 4, 1)]
