"""The vLLM command line and environment, health waiting and signal forwarding (with a stand-in child process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv.inference.launcher import (
    VLLM_MODULE,
    LaunchError,
    VLLMServerConfig,
    build_command,
    build_env,
    default_max_loras,
    wait_healthy,
)


def test_cpu_command_and_env() -> None:
    cfg = VLLMServerConfig(model="/m", port=8123, max_loras=5, cpu=True, extra_args=("--max-num-seqs", "32"))
    cmd = build_command(cfg, python="py")
    assert cmd[:3] == ["py", "-m", VLLM_MODULE]
    joined = " ".join(cmd)
    for part in (
        "--model /m",
        "--served-model-name base",
        "--host 127.0.0.1",
        "--port 8123",
        "--max-model-len 2048",
        "--enforce-eager",
        "--enable-lora",
        "--max-lora-rank 16",
        "--max-loras 5",
        "--logprobs-mode processed_logprobs",
        "--structured-outputs-config.backend xgrammar",
        "--structured-outputs-config.disable_any_whitespace true",
    ):
        assert part in joined
    assert cmd[-2:] == ["--max-num-seqs", "32"]
    assert "--gpu-memory-utilization" not in cmd
    env = build_env(cfg, {"PATH": "/bin"})
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["PATH"] == "/bin"


def test_gpu_command_has_no_eager_or_cpu_cache() -> None:
    cfg = VLLMServerConfig(model="Qwen/Qwen2.5-7B-Instruct", cpu=False, max_lora_rank=64)
    cmd = build_command(cfg)
    assert "--enforce-eager" not in cmd and "--gpu-memory-utilization" in cmd
    assert "VLLM_CPU_KVCACHE_SPACE" not in build_env(cfg, {})


def test_the_image_launch_script_starts_vllm_as_build_command_does() -> None:
    """deploy/vllm/launch.sh (the GPU image) keeps the flags that change results: sampled log-probs for GRPO and
    the one grammar backend."""
    script = (Path(__file__).parents[3] / "deploy" / "vllm" / "launch.sh").read_text()
    cmd = build_command(VLLMServerConfig(model="/m", cpu=False))
    for flag in ("--logprobs-mode", "--structured-outputs-config.backend",
                 "--structured-outputs-config.disable_any_whitespace"):
        assert f"{flag} {cmd[cmd.index(flag) + 1]}" in script


def test_bad_lora_rank_says_which_are_allowed() -> None:
    with pytest.raises(ValueError, match="one of"):
        VLLMServerConfig(model="/m", max_lora_rank=12)


def test_default_max_loras_covers_kept_versions_of_each_role() -> None:
    assert default_max_loras(["agent", "simulator"], 2) == 5
    assert default_max_loras(["agent"], 3) == 4


FAKE_SERVER = textwrap.dedent(
    """
    import http.server, signal, sys, threading
    port = int(sys.argv[1]); marker = sys.argv[2]
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404); self.end_headers()
        def log_message(self, *a): pass
    srv = http.server.HTTPServer(("127.0.0.1", port), H)
    def stop(signum, frame):
        open(marker, "w").write(str(signum)); threading.Thread(target=srv.shutdown).start()
    signal.signal(signal.SIGTERM, stop)
    srv.serve_forever()
    sys.exit(3)
    """
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_wait_healthy_and_exit_detection(tmp_path: Path) -> None:
    script = tmp_path / "fake.py"
    script.write_text(FAKE_SERVER)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(tmp_path / "sig")])
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}", proc, timeout_s=30, poll_s=0.1) < 30
    finally:
        proc.terminate()
        proc.wait()
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"])
    with pytest.raises(LaunchError, match="exited with code 4"):
        wait_healthy("http://127.0.0.1:9", dead, timeout_s=30, poll_s=0.1)


def test_serve_forwards_sigterm_to_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve() runs the child, reports readiness, forwards SIGTERM and returns the child's exit code."""
    from genenv.inference import launcher

    script = tmp_path / "fake.py"
    script.write_text(FAKE_SERVER)
    marker = tmp_path / "sig"
    port = _free_port()
    monkeypatch.setattr(launcher, "build_command", lambda cfg: [sys.executable, str(script), str(port), str(marker)])
    ready: list[str] = []

    def on_ready(url: str, seconds: float) -> None:
        ready.append(url)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

    code = launcher.serve(VLLMServerConfig(model="/m", port=port, cpu=True), timeout_s=30, on_ready=on_ready)
    assert ready == [f"http://127.0.0.1:{port}"]
    assert marker.read_text() == str(int(signal.SIGTERM))
    assert code == 3


def test_cli_rejects_a_bad_rank_before_starting_anything(model_dir: Path) -> None:
    from genenv.cli.main import app

    started = time.monotonic()
    result = CliRunner().invoke(app, ["serve", "vllm", "--model", str(model_dir), "--max-lora-rank", "12"])
    assert result.exit_code == 2
    assert time.monotonic() - started < 10


def test_cpu_dtype_follows_what_the_cpu_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    import genenv.hardware

    cfg = VLLMServerConfig(model="/m", cpu=True)
    for native, dtype in [(True, "bfloat16"), (False, "float32")]:
        monkeypatch.setattr(genenv.hardware, "cpu_computes_bf16", lambda native=native: native)
        cmd = build_command(cfg)
        assert cmd[cmd.index("--dtype") + 1] == dtype
    assert "--dtype" not in build_command(VLLMServerConfig(model="/m", cpu=False))
    explicit = build_command(VLLMServerConfig(model="/m", cpu=False, dtype="float16"))
    assert explicit[explicit.index("--dtype") + 1] == "float16"


@pytest.mark.parametrize(
    ("cores", "bind"), [({0, 1}, "0-1"), ({2, 3, 5}, "2,3,5"), (set(range(16)), None)]
)
def test_a_small_cpu_binds_the_engine_to_every_core(
    monkeypatch: pytest.MonkeyPatch, cores: set[int], bind: str | None
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: cores)
    env = build_env(VLLMServerConfig(model="/m", cpu=True), {})
    assert env.get("VLLM_CPU_OMP_THREADS_BIND") == bind
    assert env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == (None if bind is None else "0")
    # what the operator set wins
    mine = build_env(VLLMServerConfig(model="/m", cpu=True), {"VLLM_CPU_OMP_THREADS_BIND": "1"})
    assert mine["VLLM_CPU_OMP_THREADS_BIND"] == "1"


def test_a_small_cpu_can_run_the_model_in_the_engine_process_with_the_worker_s_thread_binding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Opt-in (VLLM_ENABLE_V1_MULTIPROCESSING=0): one spawned process fewer at start (docs/deployment.md, vLLM restart
    time), with the OpenMP environment vLLM gave its worker process; by default, with an operator's own binding or on
    a larger machine vLLM keeps its own processes."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    one = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    env = build_env(VLLMServerConfig(model="/m", cpu=True), one)
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert (env["OMP_NUM_THREADS"], env["OMP_PLACES"], env["OMP_PROC_BIND"]) == ("2", "{0,1}", "true")
    assert build_env(VLLMServerConfig(model="/m", cpu=True), {**one, "OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"] == "1"
    for base in ({}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, {**one, "VLLM_CPU_OMP_THREADS_BIND": "1"}):
        kept = build_env(VLLMServerConfig(model="/m", cpu=True), base)
        assert "OMP_PLACES" not in kept
        assert kept.get("VLLM_ENABLE_V1_MULTIPROCESSING") == base.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(16)))
    assert "OMP_PLACES" not in build_env(VLLMServerConfig(model="/m", cpu=True), one)
    assert "OMP_PLACES" not in build_env(VLLMServerConfig(model="/m", cpu=False), one)


def test_started_waits_for_health_and_stops_the_server_after_the_block(tmp_path: Path) -> None:
    from genenv.inference.launcher import started

    script = tmp_path / "fake.py"
    script.write_text(FAKE_SERVER)
    port = _free_port()
    marker = tmp_path / "sig"
    with started([sys.executable, str(script), str(port), str(marker)], f"http://127.0.0.1:{port}",
                 log=tmp_path / "server.log", poll_s=0.1, timeout_s=30) as server:
        assert server.port == port and server.seconds < 30 and server.proc.poll() is None
    assert server.proc.returncode == 3 and marker.read_text() == str(signal.SIGTERM)
    with pytest.raises(LaunchError, match=r"exited with code 4 .*; see .*dead\.log"), started(
        [sys.executable, "-c", "raise SystemExit(4)"], "http://127.0.0.1:9", log=tmp_path / "dead.log", poll_s=0.1
    ):
        pass


def test_a_child_started_with_die_with_parent_goes_when_its_parent_is_killed(tmp_path: Path) -> None:
    """What `genenv quickstart` / `experiment run` start their model server with: SIGKILL the parent (the OOM
    killer, a second Ctrl-C) and the server is not left behind holding its memory and port."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from genenv.inference.launcher import die_with_parent\n"
        "child = subprocess.Popen(['sleep', '120'], preexec_fn=die_with_parent)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(120)\n")])
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the parent never started its child"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    os.kill(child, 0)  # alive
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # Reaped by init once dead; until then a zombie still answers kill(0): look at its state.
        state = Path(f"/proc/{child}/stat").read_text().split()[2] if Path(f"/proc/{child}/stat").exists() else "X"
        if state in ("Z", "X"):
            break
        assert time.monotonic() < deadline, "the child outlived its killed parent"
        time.sleep(0.05)


@pytest.mark.parametrize(("trainer_dtype", "flag", "served"), [
    ("bfloat16", [], "bfloat16"), ("float32", [], "float32"), ("auto", [], "auto"), ("bfloat16", ["--dtype", "float32"],
                                                                                     "float32")])
def test_serve_vllm_auto_serves_the_trainer_s_dtype(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path, trainer_dtype: str, flag: list[str], served: str
) -> None:
    """`serve vllm` without --dtype takes GENENV_TRAINER__DTYPE (one setting pins an experiment's numerics); an
    explicit --dtype wins; the trainer's own auto is resolved per machine in build_command (test above)."""
    import genenv.inference.launcher
    from genenv.cli.main import app

    seen: list[VLLMServerConfig] = []
    monkeypatch.setattr(genenv.inference.launcher, "serve", lambda cfg, **_: seen.append(cfg) or 0)
    monkeypatch.setenv("GENENV_TRAINER__DTYPE", trainer_dtype)
    result = CliRunner().invoke(app, ["serve", "vllm", "--model", str(model_dir), *flag])
    assert result.exit_code == 0, result.output
    assert [cfg.dtype for cfg in seen] == [served]
