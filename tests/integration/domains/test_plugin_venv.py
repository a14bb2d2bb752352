"""The example plug-in package (examples/genenv-domain-example), built and installed into a fresh virtual
environment, is discovered through its entry point and runs through the simulator's validation and the verifier."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "genenv-domain-example"

PROBE = r"""
import json
from genenv.domains import REGISTRY, domain_names, get_domain
from genenv.contracts.rollouts import VerifyItem
from genenv_verifier.verification import verify_items
from genenv_simulator.generation import _task
from genenv.inference.base import Completion

domain = get_domain("word_reverse")
seed = domain.load_seeds(None, "train")[0]
items = [VerifyItem(domain="word_reverse", task=seed.payload, response=seed.payload["word"][::-1]),
         VerifyItem(domain="word_reverse", task=seed.payload, response="no")]
verdicts = verify_items(items, None, 2.0)
base = {"seed_id": seed.id, "domain": "word_reverse", "variation": 0}
fresh = _task(domain, seed, base, Completion(text='{"word": "lantern"}', finish_reason="stop",
                                              prompt_tokens=1, completion_tokens=1))
repeat = _task(domain, seed, base, Completion(text=json.dumps(seed.payload), finish_reason="stop",
                                               prompt_tokens=1, completion_tokens=1))
print(json.dumps({
    "names": domain_names(),
    "entries": [[e.name, e.source, e.ok] for e in REGISTRY.entries()],
    "scores": [v.score for v in verdicts],
    "fresh": [fresh.status.value, fresh.payload],
    "repeat": [repeat.status.value, repeat.rejection_reason.value if repeat.rejection_reason else None],
}))
"""


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_example_plugin_is_discovered_and_usable_in_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    source = tmp_path / "source"  # built from a copy: setuptools writes build/ and egg-info next to the sources
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    # No network: the example's build backend (setuptools) is the one this environment has.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(wheels), str(source)])
    (wheel,) = wheels.glob("genenv_domain_example-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    python = venv / "bin" / "python"
    # genenv's dependencies come from this environment; genenv itself from the checkout (PYTHONPATH).
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    (site / "genenv_host.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'shared'}:{REPO / 'services'}", "GENENV_HOME": str(tmp_path)}
    out = json.loads(_run([str(python), "-c", PROBE], env=env).strip().splitlines()[-1])
    assert out["names"] == ["alfworld_step", "api_bank", "arithmetic", "function_calling", "qa", "travel_plan",
                            "word_reverse"]
    assert ["word_reverse", "plugin", True] in out["entries"]
    assert out["scores"] == [1.0, 0.0]
    assert out["fresh"] == ["valid", {"word": "lantern"}]
    assert out["repeat"] == ["rejected", "duplicate"]
    # This environment never had it installed: discovery is by installed metadata only.
    here = _run([sys.executable, "-c", "from genenv.domains import domain_names; print(domain_names())"],
                env={**os.environ, "PYTHONPATH": f"{REPO / 'shared'}:{REPO / 'services'}"})
    assert "word_reverse" not in here
