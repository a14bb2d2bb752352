"""A user's first hour with the CLI (issue 32): GENENV_URL / GENENV_TOKEN, no silent in-process start, --home on
the commands that read runs, one-line errors with FILE:LINE:COL, validation before the quickstart deletes or loads
anything, the domain store in the user's GenEnv home, `genenv config check` and `genenv init`.

Everything runs in this process on SQLite files under tmp_path; the quickstart is stopped by its validation before
it could load a model (its home preparation is replaced by a function that fails the test if reached)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

import genenv.cli.common
import genenv.cli.stacks
from genenv.cli.common import run_client
from genenv.cli.main import app
from genenv.cli.stacks import follow_up_commands
from genenv.contracts.runs import RunConfig
from genenv.settings import get_settings

ROWS = [{"question": f"What is {n} plus {n}?", "answer": str(2 * n), "split": "eval" if n == 5 else "train"}
        for n in range(1, 6)]


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean user: GenEnv home and default database under tmp_path/user-home, working folder tmp_path/work."""
    for name in ("GENENV_URL", "GENENV_TOKEN", "GENENV_AUTH__TOKENS", "GENENV_AUTH__CLIENT_TOKEN",
                 "GENENV_QUEUE__EAGER"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "user-home"
    monkeypatch.setenv("GENENV_PATHS__HOME", str(home))
    monkeypatch.setenv("GENENV_DATABASE__URL", f"sqlite:///{home / 'genenv.db'}")
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "inprocess")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def _lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.strip()]


def _create_run(db_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run created in db_home/genenv.db (as a quickstart leaves one), the default database pointed elsewhere."""
    db_home.mkdir(parents=True, exist_ok=True)
    config = Path("run.json")
    config.write_text(json.dumps({"name": "first"}))
    with monkeypatch.context() as m:
        m.setenv("GENENV_DATABASE__URL", f"sqlite:///{db_home / 'genenv.db'}")
        created = _invoke("runs", "create", str(config), "--json")
    assert created.exit_code == 0, created.output
    run_id: str = json.loads(created.output)["id"]
    return run_id


# --- 1. GENENV_URL / GENENV_TOKEN, and no in-process start that nothing executes ----------------------------------


class _Reached(Exception):
    pass


def test_genenv_url_and_token_reach_the_client(user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class FakeClient:
        def __init__(self, base: str, token: str | None = None, **_: Any) -> None:
            seen.update(base=base, token=token)

        async def __aenter__(self) -> FakeClient:
            raise _Reached

        async def __aexit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(genenv.cli.common, "ControlPlaneClient", FakeClient)
    monkeypatch.setenv("GENENV_URL", "http://cp.example:8000")
    monkeypatch.setenv("GENENV_TOKEN", "short-token")
    monkeypatch.setenv("GENENV_AUTH__CLIENT_TOKEN", "long-token")

    async def call(_: Any) -> None:
        raise AssertionError("never called")

    with pytest.raises(_Reached):
        run_client(get_settings(), None, call)
    assert seen == {"base": "http://cp.example:8000", "token": "short-token"}
    # --url still wins; the long names stay aliases when the short ones are unset.
    monkeypatch.delenv("GENENV_URL")
    monkeypatch.delenv("GENENV_TOKEN")
    monkeypatch.setenv("GENENV_SERVICES__CONTROL_PLANE", "http://long.example:8000")
    with pytest.raises(_Reached):
        run_client(get_settings(), None, call)
    assert seen == {"base": "http://long.example:8000", "token": "long-token"}
    with pytest.raises(_Reached):
        run_client(get_settings(), "http://flag.example", call)
    assert seen["base"] == "http://flag.example"


def test_runs_list_talks_to_genenv_url(user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENENV_URL", "http://127.0.0.1:9")  # nothing listens: the answer names the address
    result = _invoke("runs", "list")
    assert result.exit_code == 1, result.output
    assert "http://127.0.0.1:9" in result.output and "Traceback" not in result.output


def test_in_process_start_and_resume_refuse_with_a_hint(user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = _create_run(user, monkeypatch)
    for action in ("start", "resume"):
        result = _invoke("runs", action, run_id)
        assert result.exit_code == 2, result.output
        assert _lines(result) == [
            "error: no control plane configured: set GENENV_URL (see `genenv up`) or use `genenv quickstart`; "
            "in-process, nothing would execute the run"
        ]
    assert json.loads(_invoke("runs", "show", run_id).output)["status"] == "created"


# --- 2. --home on every command that reads runs; unknown ids exit non-zero ------------------------------------------


def test_home_reads_an_embedded_database(user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qs_home = tmp_path / "work" / ".genenv" / "quickstart"
    run_id = _create_run(qs_home, monkeypatch)
    # The default database (the user's home) does not hold the run; --home does.
    assert _invoke("runs", "show", run_id).exit_code == 2
    shown = _invoke("runs", "show", run_id, "--home", str(qs_home))
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["id"] == run_id
    listed = _invoke("runs", "list", "--home", str(qs_home), "--json")
    assert [r["id"] for r in json.loads(listed.output)["items"]] == [run_id]
    exported = _invoke("export", run_id, "--home", str(qs_home), "-o", "tasks.jsonl", "--status", "all")
    assert exported.exit_code == 0, exported.output
    assert "wrote 0 tasks to tasks.jsonl" in exported.output
    # The commands that read runs all take --home.
    for command in (["runs", "watch"], ["runs", "plot"], ["experiment", "report"]):
        help_text = _invoke(*command, "--help").output
        assert "--home" in help_text, command
    missing = _invoke("runs", "show", run_id, "--home", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and len(_lines(missing)) == 1 and "no GenEnv database in" in missing.output
    assert not (tmp_path / "nowhere").exists()


def test_export_of_an_unknown_run_fails_and_writes_nothing(user: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    qs_home = tmp_path / "qs"
    _create_run(qs_home, monkeypatch)
    result = _invoke("export", "0123456789abcdef", "--home", str(qs_home), "-o", "out.jsonl")
    assert result.exit_code == 2, result.output
    assert _lines(result) == [f"error: run '0123456789abcdef' not found in sqlite:///{qs_home.resolve()}/genenv.db"]
    assert not Path("out.jsonl").exists()


def test_quickstart_follow_ups_run_as_printed(user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qs_home = Path(".genenv/quickstart")
    run_id = _create_run(qs_home, monkeypatch)
    commands = follow_up_commands(run_id, qs_home)
    assert [c.split()[:3] for c in commands] == [
        ["genenv", "runs", "show"], ["genenv", "runs", "plot"], ["genenv", "export", run_id],
        ["genenv", "runs", "tasks"]]
    for command in commands:
        if " plot " in command:  # needs matplotlib (the bench extra); its --home is checked in the test above
            continue
        result = _invoke(*command.split()[1:])
        assert result.exit_code == 0, (command, result.output)


# --- 3. an invalid domain name is one line naming the rule ----------------------------------------------------------


def test_an_invalid_domain_name_is_one_line_with_the_fix(user: Path) -> None:
    Path("my-tools.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    result = _invoke("domains", "add", "my-tools", "my-tools.jsonl", "--kind", "exact_answer")
    assert result.exit_code == 2
    assert _lines(result) == [
        "error: domain name 'my-tools' is not allowed: use lower-case letters, digits and _, 2-48 characters, "
        "starting with a letter (^[a-z][a-z0-9_]{1,47}$); try 'my_tools'"
    ]
    assert not (user / "domains.db").exists()


# --- 6. ordinary mistakes: FILE:LINE:COL, no tracebacks, plain flags ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("broken.yaml", "name: x\ncurriculum:\n  beta: [1,\n", "broken.yaml:4:1: invalid YAML: "),
        ("fields.yaml", "name: x\ncurriculum:\n  beta: 0\n", "fields.yaml:3:9: curriculum.beta: Input should be "
                                                              "greater than 0"),
        ("wrapped.yaml", "config:\n  epochs: many\n", "wrapped.yaml:2:11: epochs: Input should be a valid integer"),
        ("broken.json", '{"name": "x",\n "epochs": }', "broken.json:2:12: invalid JSON: Expecting value"),
        ("fields.json", '{"name": "x",\n "rollouts_per_task": 1}', "fields.json:2:23: rollouts_per_task: Input "
                                                                   "should be greater than or equal to 2"),
        ("run.txt", "name: x\n", "run.txt: unsupported config format '.txt': write YAML (.yaml, .yml) or JSON"),
    ],
)
def test_config_errors_name_file_line_column(user: Path, name: str, text: str, expected: str) -> None:
    Path(name).write_text(text)
    for command in (["runs", "create", name], ["config", "check", name]):
        result = _invoke(*command)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and len(_lines(result)) <= 3
        assert _lines(result)[0].startswith(expected), result.output


def test_experiment_errors_are_located_too(user: Path) -> None:
    Path("exp.yaml").write_text("name: e\nmodes: [genenv]\nreplicates: 2\ntemplate:\n  curriculum:\n    k_min: 2\n")
    result = _invoke("experiment", "create", "exp.yaml")
    assert result.exit_code == 2
    assert _lines(result)[0].startswith("exp.yaml:6:12: template.curriculum.k_min: ")


def test_export_bad_status_and_empty_database(user: Path) -> None:
    bad = _invoke("export", "abc", "--status", "rejectd")
    assert bad.exit_code == 2 and "Invalid value for '--status'" in bad.output and "'rejectd'" in bad.output
    assert "Traceback" not in bad.output
    # The configured database does not exist: one line, no database and no output file created.
    empty = _invoke("export", "abc", "-o", "tasks.jsonl")
    assert empty.exit_code == 2
    assert len(_lines(empty)) == 1 and "no GenEnv database at" in empty.output
    assert not Path("tasks.jsonl").exists() and not (user / "genenv.db").exists()
    # A database file without GenEnv's schema: one line too.
    user.mkdir(parents=True, exist_ok=True)
    (user / "genenv.db").write_bytes(b"")
    foreign = _invoke("export", "abc", "-o", "tasks.jsonl")
    assert foreign.exit_code == 2 and len(_lines(foreign)) == 1 and "cannot read runs from" in foreign.output
    assert not Path("tasks.jsonl").exists()


def test_flags_show_no_value_type_in_help(user: Path) -> None:
    for command in (["runs", "list"], ["domains", "list"], ["config", "check"], ["experiment", "show"]):
        help_text = _invoke(*command, "--help").output
        assert "--json" in help_text and "<bool>" not in help_text, command


# --- 7. validation before the quickstart deletes or starts anything; the domain store in the user's home -----------


@pytest.fixture
def previous_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A previous quickstart home with a file in it, and a home preparation that fails the test if reached."""
    home = tmp_path / "qs"
    home.mkdir()
    (home / "genenv.db").write_text("previous run")

    def reached(*_: object, **__: object) -> None:
        raise AssertionError("the quickstart prepared its home (deleting the previous one) before validating")

    monkeypatch.setattr(genenv.cli.stacks, "prepare_embedded_home", reached)
    monkeypatch.setattr(genenv.cli.stacks, "inference_server", reached)
    return home


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "bogus"], "'bogus' is not a run mode"),
        (["--domain", "nope"], "unknown domain 'nope': known are"),
        (["--domain", "my-tools"], "unknown domain 'my-tools'"),
    ],
)
def test_quickstart_validates_before_touching_its_home(user: Path, previous_home: Path, args: list[str],
                                                       message: str) -> None:
    result = _invoke("quickstart", "--home", str(previous_home), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert (previous_home / "genenv.db").read_text() == "previous run"


def test_domains_live_in_the_user_home(user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       previous_home: Path) -> None:
    listed = _invoke("domains", "list")
    assert listed.exit_code == 0, listed.output
    assert not (user / "domains.db").exists() and not Path(".genenv").exists()  # a listing creates nothing
    Path("sums.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    added = _invoke("domains", "add", "sums", "sums.jsonl", "--kind", "exact_answer")
    assert added.exit_code == 0, added.output
    assert (user / "domains.db").is_file() and not Path(".genenv").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert "sums" in _invoke("domains", "list").output
    Path("run.yaml").write_text("domain: sums\n")
    assert _invoke("config", "check", "run.yaml").exit_code == 0
    # The quickstart accepts the domain from this other folder too: validation passes, the home is prepared.
    with pytest.raises(AssertionError, match="prepared its home"):
        CliRunner().invoke(app, ["quickstart", "--home", str(previous_home), "--domain", "sums"],
                           catch_exceptions=False)


# --- genenv config check / genenv init ------------------------------------------------------------------------------


def test_init_writes_a_config_that_config_check_and_runs_create_accept(user: Path) -> None:
    written = _invoke("init", "--domain", "qa", "-o", "my-run.yaml")
    assert written.exit_code == 0, written.output
    text = Path("my-run.yaml").read_text()
    assert text.count("\n# ") >= 10  # commented
    config = RunConfig.model_validate(yaml.safe_load(text))
    assert config.domain == "qa" and config.name == "my-run"
    checked = _invoke("config", "check", "my-run.yaml")
    assert checked.exit_code == 0, checked.output
    assert "my-run.yaml: valid run config" in checked.output
    resolved = yaml.safe_load(checked.output.split("my-run.yaml: valid")[0])
    assert RunConfig.model_validate(resolved) == config
    assert _invoke("runs", "create", "my-run.yaml").exit_code == 0
    again = _invoke("init", "--domain", "qa", "-o", "my-run.yaml")
    assert again.exit_code == 2 and "exists; pass --force" in again.output
    assert _invoke("init", "--domain", "nope", "-o", "other.yaml").exit_code == 2
    assert not Path("other.yaml").exists()


def test_config_check_reads_experiments_and_names_an_unknown_domain(user: Path) -> None:
    repo = Path(__file__).resolve().parents[3]
    checked = _invoke("config", "check", str(repo / "examples" / "experiment-cpu-arithmetic.yaml"), "--json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.output.split("\n" + str(repo))[0])["template"]["domain"] == "arithmetic"
    Path("run.yaml").write_text("name: x\n\ndomain: nope\n")
    unknown = _invoke("config", "check", "run.yaml")
    assert unknown.exit_code == 2
    assert _lines(unknown)[0].startswith("run.yaml:3:9: domain: unknown domain 'nope'")

