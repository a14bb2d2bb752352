"""On a CUDA device (marker gpu): the trainer agrees with the CPU, and the trainer and the local backend pick the GPU.

Skipped where torch sees no CUDA device. ``GENENV_TEST_GPU_DEVICE=cpu`` runs them on the CPU instead, to check
the tests themselves on a machine without a GPU (the comparisons are then CPU against CPU). They need only a
tiny random model built here (genenv.models.synthetic), no model files, and only the packages a GPU machine has
plus deploy/gpu/requirements-gpu-check.txt (docs/deployment.md, "A GPU check").
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

DEVICE = os.environ.get("GENENV_TEST_GPU_DEVICE", "cuda")
ON_CUDA = DEVICE == "cuda"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(ON_CUDA and not torch.cuda.is_available(), reason="needs a CUDA device"),
]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_config() -> dict[str, Any]:
    from genenv.models.synthetic import QWEN_7B, load_config, shrink

    return shrink(load_config(QWEN_7B))


@pytest.fixture(scope="module")
def model_folder(tiny_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A float32 random Qwen2 of toy size with the byte-level ChatML tokenizer, saved as a model folder."""
    from genenv.models.synthetic import save_random_model

    return save_random_model(tiny_config, tmp_path_factory.mktemp("tiny-qwen") / "model", dtype="float32")


def test_auto_picks_the_gpu_and_bf16() -> None:
    from genenv.hardware import resolve_device, resolve_dtype
    from genenv_trainer.training.lora import resolve_device as trainer_device

    if not ON_CUDA:
        pytest.skip("what 'auto' picks is only a question where there is a GPU")
    assert resolve_device("auto") == "cuda" and trainer_device("auto").type == "cuda"
    assert resolve_dtype("auto", "cuda") == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32")


@pytest.mark.parametrize(("dtype", "logprob_tol", "grad_tol"), [("float32", 1e-4, 1e-3), ("bfloat16", 0.1, 0.1)])
def test_trainer_logprobs_and_lora_gradients_agree_with_the_cpu(
    tiny_config: dict[str, Any], dtype: str, logprob_tol: float, grad_tol: float
) -> None:
    from genenv_trainer.training.devcheck import parity

    out = parity(tiny_config, device=torch.device(DEVICE), dtype=dtype)
    assert out["device"].startswith(DEVICE) and out["positions"] > 30 and out["lora_tensors"] == 16
    assert out["grad_norm"] > 0  # B is random: both LoRA matrices get a gradient
    assert out["logprob_max_abs_diff"] <= logprob_tol, out
    assert out["grad_rel_l2"] <= grad_tol, out


def test_train_agent_runs_on_the_device_auto_picks(model_folder: Path) -> None:
    """runner.train_agent with the default trainer settings (device auto, dtype auto) trains on the GPU."""
    from genenv.contracts.runs import RunConfig
    from genenv.settings import TrainerSettings
    from genenv_trainer.records import Attempt, RolloutGroup
    from genenv_trainer.training import runner

    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    groups = [RolloutGroup(1, 0, [Attempt(1, messages, "4", 1.0), Attempt(2, messages, "5", 0.0)])]
    config = RunConfig.model_validate({"agent": {"learning_rate": 1e-2, "batch_size": 2, "micro_batch_size": 2,
                                                 "max_steps_per_epoch": 1}})
    trainer = TrainerSettings(device="auto" if ON_CUDA else "cpu")
    result = runner.train_agent(model_path=model_folder, parent=None, config=config, fresh=groups, replay=[],
                                trainer=trainer, seed=0)
    m = result.metrics
    assert result.model is not None and m["steps"] == 1 and m["device"] == DEVICE
    lora_b = [p for n, p in result.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(p.device.type == DEVICE for p in lora_b)
    assert any(float(p.detach().abs().max()) > 0 for p in lora_b)  # the step moved the adapter off PEFT's zero init
    if ON_CUDA:
        assert m["dtype"] == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32")
        assert m["peak_cuda_mb"] > 0 and m["peak_cuda_reserved_mb"] >= m["peak_cuda_mb"]


async def test_local_backend_decodes_on_the_device_with_the_models_logprobs(model_folder: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv.inference.base import SamplingParams
    from genenv.inference.local import LocalBackend

    backend = LocalBackend(model_folder, dtype="float32", device="auto" if ON_CUDA else "cpu", seed=3)
    try:
        out = await backend.complete("The answer is", sampling=SamplingParams(temperature=0.7, max_tokens=12))
    finally:
        await backend.aclose()
    assert backend.device == DEVICE and out.completion_tokens > 0
    tok = AutoTokenizer.from_pretrained(str(model_folder))
    model = AutoModelForCausalLM.from_pretrained(str(model_folder)).eval()  # the CPU, float32: the reference
    prompt = tok("The answer is", add_special_tokens=False).input_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([prompt + out.token_ids])).logits[0].float() / 0.7, dim=-1)
    expected = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(out.token_ids)]
    assert out.token_logprobs == pytest.approx(expected, abs=1e-3)


async def test_local_backend_seeded_sampling_reproduces_and_the_grammar_holds(model_folder: Path) -> None:
    from genenv.domains import get_domain
    from genenv.inference.base import SamplingParams
    from genenv.inference.local import LocalBackend

    schema = get_domain("arithmetic").task_json_schema()
    device = "auto" if ON_CUDA else "cpu"
    msg = [{"role": "user", "content": "Write a task."}]
    a, b = LocalBackend(model_folder, device=device, seed=5), LocalBackend(model_folder, device=device, seed=5)
    try:
        sampled = SamplingParams(temperature=1.0, max_tokens=16)
        first = await asyncio.gather(*(a.chat(msg, sampling=sampled) for _ in range(4)))
        again = await asyncio.gather(*(b.chat(msg, sampling=sampled) for _ in range(4)))
        guided = await a.chat(msg, sampling=SamplingParams(temperature=1.0, max_tokens=80, json_schema=schema))
    finally:
        await a.aclose()
        await b.aclose()
    assert a.device == DEVICE
    if ON_CUDA:
        assert a.dtype == ("bfloat16" if torch.cuda.is_bf16_supported() else "float32")  # dtype auto on a GPU
    assert [c.token_ids for c in first] == [c.token_ids for c in again]
    assert len({tuple(c.token_ids) for c in first}) > 1
    assert guided.finish_reason == "stop" and set(json.loads(guided.text)) == {"expression"}


def test_local_backend_synchronises_once_per_step_whatever_the_batch(model_folder: Path) -> None:
    """The host waits for the GPU a fixed number of times per decoding step, not once per row: 8 rows cost what
    1 row costs (the loop before issue 21 synchronised for every row's token and log-prob)."""
    if not ON_CUDA:
        pytest.skip("synchronisation is a CUDA matter")
    import time

    from genenv.inference.local import LocalBackend, _Request

    backend = LocalBackend(model_folder, device="cuda", seed=0)
    backend._ensure_loaded()
    backend._eos_ids = set()  # every row decodes all 16 tokens: both batches take the same number of steps
    prompt = str(backend._tokenizer.apply_chat_template([{"role": "user", "content": "Count."}],
                                                        add_generation_prompt=True, tokenize=False))

    def syncs(rows: int) -> tuple[int, int]:
        requests = [_Request(prompt=prompt, adapter=None, temperature=0.0, max_tokens=16, stop=[], seed=i,
                             submitted=time.perf_counter(), future=None)  # type: ignore[arg-type]
                    for i in range(rows)]
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                out = backend._generate_batch(requests)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return sum("synchroniz" in str(w.message) for w in seen), len(out[0].token_ids)

    syncs(1)  # warm-up: first calls set up kernels and caches
    one, steps_one = syncs(1)
    eight, steps_eight = syncs(8)
    asyncio.run(backend.aclose())
    assert steps_one == steps_eight
    assert one > 0 and eight == one, (one, eight, steps_one)
