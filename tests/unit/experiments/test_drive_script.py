"""docs/experiments/drive.sh, the loop both experiment drivers share: with the home's database as the only state,
an experiment already completed is skipped, one stopped part-way is resumed by id, a new one is run — so a driver
re-run after a stop goes on where it stopped. The `genenv` on PATH here records its arguments instead of running
experiments: what is tested is the driver's choice of command."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_drive_files_skips_completed_resumes_stopped_and_runs_new(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    stub = bin_dir / "genenv"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    stub.chmod(0o755)
    db = sqlite3.connect(home / "genenv.db")
    # As the database keeps them: an experiment's stored status stays "running"; its members say whether it is done.
    db.execute("CREATE TABLE experiment (id TEXT, name TEXT, status TEXT)")
    db.executemany("INSERT INTO experiment VALUES (?, ?, ?)", [("e1", "done", "running"), ("e2", "stopped", "running")])
    db.execute("CREATE TABLE run (id TEXT, experiment_id TEXT, status TEXT)")
    db.executemany("INSERT INTO run VALUES (?, ?, ?)", [("r1", "e1", "completed"), ("r2", "e1", "completed"),
                                                        ("r3", "e2", "completed"), ("r4", "e2", "running")])
    db.commit()
    db.close()
    files = []
    for name in ("done", "stopped", "new"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: {name}\nmodes: [genenv]\n")
        files.append(str(path))
    script = f'source {ROOT / "docs/experiments/drive.sh"}; upgrade_home "$0"; drive_files "$0" "$@"'
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", script, str(home), *files], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert calls.read_text().splitlines() == [
        "db upgrade",
        f"experiment resume e2 --home {home} --report-dir {home}/report-stopped",
        f"experiment run {files[2]} --home {home} --keep --report-dir {home}/report-new",
    ]
    assert [line.split(": ", 1)[1] for line in out.stdout.splitlines()] == [
        "done completed", "resume stopped (e2)", "stopped completed", "run new", "new completed"]
