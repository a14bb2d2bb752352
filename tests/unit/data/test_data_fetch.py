"""`genenv data fetch`'s library: download from a loopback HTTP server serving the fixture files, verify, install
atomically; offline, HTTP errors and checksum mismatches leave nothing behind; the pinned wheel path through pip."""

from __future__ import annotations

import hashlib
import http.server
import importlib.metadata
import json
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.data.derive import DERIVATIONS
from genenv.data.fetch import DataFetchError, fetch_one, inspect, resolve_names
from genenv.data.manifest import MARKER, BenchmarkData, FileEntry, Manifest, ManifestError, Source, load_manifest
from genenv.domains import get_domain
from genenv.domains.api_bank.domain import load_level
from tests.benchdata import FIXTURE_BENCHMARKS
from tests.conftest import free_port

DERIVED = {"bamboogle": {"test.jsonl": "bamboogle_jsonl"}, "alfworld": {"games_index.jsonl": "alfworld_index"}}


class _Server(http.server.ThreadingHTTPServer):
    requests: list[str]


class _Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, directory=str(FIXTURE_BENCHMARKS), **kwargs)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[_Server]:
    """The fixture subsets served over HTTP on loopback (the stand-in for the upstream repositories)."""
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.requests = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(name: str, base_url: str, **overrides: dict[str, object]) -> BenchmarkData:
    """A manifest entry for a fixture subset: its files over HTTP, its derived files derived."""
    folder = FIXTURE_BENCHMARKS / name
    derived = DERIVED.get(name, {})
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "SOURCE.md"):
        rel = path.relative_to(folder).as_posix()
        body = path.read_bytes()
        fields: dict[str, object] = {"path": rel, "sha256": _sha(body), "size": len(body)}
        if rel in derived:
            fields |= {"source": "derived", "derive": derived[rel]}
        else:
            fields |= {"source": "loopback", "member": f"{name}/{rel}"}
        files.append(FileEntry.model_validate(fields | overrides.get(rel, {})))
    source = Source(id="loopback", kind="http", label="test server", revision="fixture-1", verified="test",
                    base_url=base_url)  # fmt: skip
    return BenchmarkData(title=name, licence="test", revision="fixture-1", official="test", sources=[source],
                         files=files)  # fmt: skip


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/"


def _left_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_fetch_installs_verified_files_that_the_domains_read(server: _Server, tmp_path: Path) -> None:
    root = tmp_path / "benchmarks"
    for name in ("bamboogle", "api_bank"):
        entry = _entry(name, _url(server))
        outcome = fetch_one(name, entry, root)
        assert outcome.action == "fetched" and outcome.folder == root / name
        for f in entry.files:
            assert (root / name / f.path).read_bytes() == (FIXTURE_BENCHMARKS / name / f.path).read_bytes()
        marker = json.loads((root / name / MARKER).read_text())
        assert marker["revision"] == "fixture-1" and marker["files"] == len(entry.files)
        status = inspect(name, entry, root, verify=True)
        assert status.state == "verified" and status.files_ok == len(entry.files) and status.fetched_at
    assert _left_in(root) == ["api_bank", "bamboogle"]  # no staging folder, no lock file
    assert "bamboogle/test.jsonl" not in " ".join(server.requests)  # derived here, not downloaded
    assert get_domain("qa").load_seeds(root, "eval") and load_level(root, "level-1")


def test_a_second_fetch_downloads_nothing(server: _Server, tmp_path: Path) -> None:
    entry = _entry("api_bank", _url(server))
    fetch_one("api_bank", entry, tmp_path)
    served = len(server.requests)
    assert fetch_one("api_bank", entry, tmp_path).action == "already present"
    assert len(server.requests) == served
    assert fetch_one("api_bank", entry, tmp_path, force=True).action == "fetched"  # --force fetches again
    assert len(server.requests) == 2 * served


def test_a_folder_laid_by_hand_that_matches_is_left_alone(server: _Server, tmp_path: Path) -> None:
    shutil.copytree(FIXTURE_BENCHMARKS / "bamboogle", tmp_path / "bamboogle")
    outcome = fetch_one("bamboogle", _entry("bamboogle", _url(server)), tmp_path)
    assert outcome.action == "already present" and server.requests == []
    assert not (tmp_path / "bamboogle" / MARKER).exists()  # verified by sha256, not rewritten


def test_a_checksum_mismatch_installs_nothing(server: _Server, tmp_path: Path) -> None:
    bad = {"lv1-lv2-samples/level-1-given-desc/" + p.name: {"sha256": "0" * 64}
           for p in (FIXTURE_BENCHMARKS / "api_bank" / "lv1-lv2-samples" / "level-1-given-desc").glob("*.jsonl")}
    with pytest.raises(DataFetchError, match=r"checksum mismatch for api_bank/lv1-lv2-samples.*nothing was installed"):
        fetch_one("api_bank", _entry("api_bank", _url(server), **bad), tmp_path)
    assert _left_in(tmp_path) == []


def test_a_failed_refetch_keeps_the_installed_copy(server: _Server, tmp_path: Path) -> None:
    good = _entry("bamboogle", _url(server))
    fetch_one("bamboogle", good, tmp_path)
    bad = _entry("bamboogle", _url(server), **{"test.jsonl": {"sha256": "f" * 64}})
    with pytest.raises(DataFetchError, match=r"checksum mismatch for bamboogle/test.jsonl from genenv.data.derive"):
        fetch_one("bamboogle", bad, tmp_path, force=True)
    assert _left_in(tmp_path) == ["bamboogle"]
    assert inspect("bamboogle", good, tmp_path, verify=True).state == "verified"


def test_more_bytes_than_listed_stop_the_download(server: _Server, tmp_path: Path) -> None:
    entry = _entry("bamboogle", _url(server), **{"bamboogle_test_questions_and_answers.json": {"size": 100}})
    with pytest.raises(DataFetchError, match="more than the expected 100 bytes"):
        fetch_one("bamboogle", entry, tmp_path)
    assert _left_in(tmp_path) == []


def test_offline_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    entry = _entry("api_bank", f"http://127.0.0.1:{free_port()}/")  # nothing listens there
    with pytest.raises(DataFetchError, match=r"cannot download http://127\.0\.0\.1.*offline"):
        fetch_one("api_bank", entry, tmp_path / "data")
    assert _left_in(tmp_path / "data") == []


def test_a_missing_upstream_file_is_an_http_error(server: _Server, tmp_path: Path) -> None:
    entry = _entry("bamboogle", _url(server), **{"bamboogle_test_questions_and_answers.json": {"member": "gone.json"}})
    with pytest.raises(DataFetchError, match=r"HTTP 404 for http://127.0.0.1:.*/gone.json"):
        fetch_one("bamboogle", entry, tmp_path)
    assert _left_in(tmp_path) == []


def test_a_differing_folder_is_replaced_only_with_force(server: _Server, tmp_path: Path) -> None:
    (tmp_path / "bamboogle").mkdir()
    (tmp_path / "bamboogle" / "test.jsonl").write_text("{}\n")
    entry = _entry("bamboogle", _url(server))
    with pytest.raises(DataFetchError, match=r"does not match the manifest.*--force"):
        fetch_one("bamboogle", entry, tmp_path)
    assert (tmp_path / "bamboogle" / "test.jsonl").read_text() == "{}\n"
    assert fetch_one("bamboogle", entry, tmp_path, force=True).action == "fetched"
    assert inspect("bamboogle", entry, tmp_path, verify=True).state == "verified"
    assert _left_in(tmp_path) == ["bamboogle"]  # the old folder was removed after the swap


def _wheel(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A minimal wheel of the distribution genenv-fixture-data 1.0 holding ``files`` under its data/ folder."""
    wheel = tmp_path / "wheels" / "genenv_fixture_data-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    info = "genenv_fixture_data-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel, body in files.items():
            zf.writestr(f"genenv_fixture_data/data/{rel}", body)
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: genenv-fixture-data\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def _wheel_entry(wheel_sha256: str, files: dict[str, bytes]) -> BenchmarkData:
    source = Source(id="pypi", kind="wheel", label="PyPI genenv-fixture-data", revision="1.0", verified="test",
                    distribution="genenv-fixture-data", wheel_sha256=wheel_sha256)  # fmt: skip
    entries = [FileEntry(path=rel, sha256=_sha(body), size=len(body), source="pypi",
                         member=f"genenv_fixture_data/data/{rel}") for rel, body in files.items()]  # fmt: skip
    return BenchmarkData(title="t", licence="t", revision="1.0", official="t", sources=[source], files=entries)


def test_a_wheel_source_is_downloaded_by_pip_with_its_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "BFCL_v4_simple_python.json": (FIXTURE_BENCHMARKS / "bfcl" / "BFCL_v4_simple_python.json").read_bytes(),
        "possible_answer/BFCL_v4_simple_python.json": (
            FIXTURE_BENCHMARKS / "bfcl" / "possible_answer" / "BFCL_v4_simple_python.json"
        ).read_bytes(),
    }
    wheel = _wheel(tmp_path, files)
    # pip's own configuration: a local folder instead of the index (no network in tests).
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheel.parent))
    entry = _wheel_entry(_sha(wheel.read_bytes()), files)
    assert fetch_one("fixture", entry, tmp_path / "data").action == "fetched"
    for rel, body in files.items():
        assert (tmp_path / "data" / "fixture" / rel).read_bytes() == body
    # A wheel whose sha256 is not the pinned one is refused by pip (--require-hashes); nothing is installed.
    with pytest.raises(DataFetchError, match=r"pip could not download genenv-fixture-data==1.0"):
        fetch_one("other", _wheel_entry("0" * 64, files), tmp_path / "data")
    assert _left_in(tmp_path / "data") == ["fixture"]


def _pinned_bfcl_installed() -> bool:
    try:
        return importlib.metadata.version("bfcl-eval") == load_manifest().benchmarks["bfcl"].sources[0].revision
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not _pinned_bfcl_installed(), reason="the pinned bfcl-eval is not installed (scripts/setup.sh)")
def test_bfcl_comes_from_the_installed_package_and_matches_the_manifest(tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no download expected: {request.url}")

    entry = load_manifest().benchmarks["bfcl"]
    with httpx.Client(transport=httpx.MockTransport(refuse)) as client:
        assert fetch_one("bfcl", entry, tmp_path, client=client).action == "fetched"
    assert inspect("bfcl", entry, tmp_path, verify=True).state == "verified"
    assert get_domain("function_calling").load_seeds(tmp_path, "train")


def test_the_manifest_lists_every_file_of_the_fixture_subsets() -> None:
    manifest = load_manifest()
    for name in BENCHMARKS:
        listed = {f.path for f in manifest.benchmarks[name].files}
        subset = {p.relative_to(FIXTURE_BENCHMARKS / name).as_posix()
                  for p in (FIXTURE_BENCHMARKS / name).rglob("*") if p.is_file() and p.name != "SOURCE.md"}  # fmt: skip
        assert subset <= listed, (name, subset - listed)


def test_derivations_reproduce_the_subsets_derived_files() -> None:
    derived = {
        ("bamboogle", "test.jsonl"): "bamboogle_jsonl",
        ("alfworld", "games_index.jsonl"): "alfworld_index",
        ("travelplanner", "database/flights_from_validation_reference.csv"): "travelplanner_flights",
    }
    for (name, rel), fn in derived.items():
        assert DERIVATIONS[fn](FIXTURE_BENCHMARKS / name) == (FIXTURE_BENCHMARKS / name / rel).read_bytes(), rel


BENCHMARKS = ("api_bank", "bamboogle", "bfcl", "alfworld", "travelplanner")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full_data(n)) for n in BENCHMARKS])
def test_the_full_data_matches_the_manifest(name: str, full_benchmarks_dir: Path) -> None:
    status = inspect(name, load_manifest().benchmarks[name], full_benchmarks_dir, verify=True)
    assert status.state in ("verified", "package"), status.problems[:5]


def test_names_and_manifests_are_checked(tmp_path: Path) -> None:
    manifest = load_manifest()
    assert resolve_names(manifest, []) == resolve_names(manifest, ["all"]) == list(manifest.benchmarks)
    assert resolve_names(manifest, ["travelplanner", "bfcl"]) == ["bfcl", "travelplanner"]  # manifest order
    with pytest.raises(ValueError, match="unknown benchmark mmlu: choose from api_bank"):
        resolve_names(manifest, ["mmlu"])
    with pytest.raises(ManifestError, match="cannot read the data manifest"):
        load_manifest(tmp_path / "missing.json")
    escaping = json.loads(Manifest(benchmarks={}).model_dump_json())
    escaping["benchmarks"]["x"] = {
        "title": "x", "licence": "x", "revision": "x", "official": "x", "sources": [],
        "files": [{"path": "../outside", "sha256": "0" * 64, "size": 1, "source": "derived", "derive": "x"}],
    }  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps(escaping))
    with pytest.raises(ManifestError, match="must stay inside the benchmark folder"):
        load_manifest(tmp_path / "m.json")


def _manifest_file(tmp_path: Path, base_url: str) -> Path:
    manifest = Manifest(benchmarks={n: _entry(n, base_url) for n in ("bamboogle", "api_bank")})
    path = tmp_path / "manifest.json"
    path.write_text(manifest.model_dump_json())
    return path


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["data", *args], env={"COLUMNS": "400"})


def test_cli_fetch_then_status(server: _Server, tmp_path: Path) -> None:
    manifest, dest = str(_manifest_file(tmp_path, _url(server))), str(tmp_path / "data")
    fetched = _cli("fetch", "bamboogle", "--dest", dest, "--manifest", manifest)
    assert fetched.exit_code == 0, fetched.output
    assert f"bamboogle: fetched at {dest}/bamboogle (fixture-1)" in fetched.output
    again = _cli("fetch", "bamboogle", "--dest", dest, "--manifest", manifest)
    assert again.exit_code == 0 and "bamboogle: already present" in again.output
    status = _cli("status", "--dest", dest, "--manifest", manifest, "--verify")
    assert status.exit_code == 0, status.output
    rows = {line.split("│")[1].strip(): line for line in status.output.splitlines() if line.count("│") > 3}
    assert "verified" in rows["bamboogle"] and "fixture-1" in rows["bamboogle"] and "2/2" in rows["bamboogle"]
    assert "absent" in rows["api_bank"]
    assert f"data folder: {dest} (setting paths.benchmarks, GENENV_PATHS__BENCHMARKS)" in status.output


def test_cli_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    offline = str(_manifest_file(tmp_path, f"http://127.0.0.1:{free_port()}/"))
    dest = tmp_path / "data"
    unknown = _cli("fetch", "mmlu", "--dest", str(dest), "--manifest", offline)
    assert unknown.exit_code == 2 and "unknown benchmark mmlu: choose from bamboogle, api_bank or all" in unknown.output
    failed = _cli("fetch", "all", "--dest", str(dest), "--manifest", offline)
    assert failed.exit_code == 1 and "Is this machine offline?" in failed.output
    assert "not fetched: bamboogle, api_bank" in failed.output and "Traceback" not in failed.output
    assert _left_in(dest) == []
    broken = _cli("status", "--manifest", str(tmp_path / "nope.json"))
    assert broken.exit_code == 2 and "cannot read the data manifest" in broken.output


def test_docs_list_every_benchmark_with_its_pinned_revisions_and_file_count() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "benchmarks.md").read_text()
    assert doc.index("## Getting the data") < doc.index("## The evaluators")  # the page starts with the data
    for name, entry in load_manifest().benchmarks.items():
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"| {len(entry.files)} |" in row, name
        for src in entry.sources:
            pin = src.revision if src.kind == "wheel" else src.revision[:8]
            assert pin in row, (name, pin)
