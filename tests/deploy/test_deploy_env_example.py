"""deploy/.env.example documents every setting and is regenerated whenever GenEnvSettings changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deploy_policy import settings_env_names


def test_env_example_is_up_to_date(repo: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(repo / "deploy/scripts/gen_env_example.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def test_env_example_lists_every_setting_with_help(repo: Path) -> None:
    lines = (repo / "deploy/.env.example").read_text().splitlines()
    documented = {line[2:].split("=", 1)[0] for line in lines if line.startswith("# GENENV_")}
    assert documented == settings_env_names()
    for i, line in enumerate(lines):
        if line.startswith("# GENENV_"):
            assert lines[i - 1].startswith("# ") and lines[i - 1].endswith("]"), f"no help text above {line}"


def test_check_mode_detects_a_stale_file(repo: Path, tmp_path: Path) -> None:
    stale = tmp_path / ".env.example"
    stale.write_text((repo / "deploy/.env.example").read_text().replace("GENENV_REDIS__URL", "GENENV_REDIS__OLD"))
    out = subprocess.run(
        [sys.executable, str(repo / "deploy/scripts/gen_env_example.py"), "--check", "--output", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1 and "out of date" in out.stderr
