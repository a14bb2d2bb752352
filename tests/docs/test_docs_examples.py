"""examples/*.yaml are valid run configs that `genenv runs create` accepts, and say what their comments claim."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from docs_helpers import EXAMPLES, REPO
from typer.testing import CliRunner

from genenv.cli.experiments import load_experiment
from genenv.cli.main import app
from genenv.contracts.modes import MODES
from genenv.contracts.runs import GrpoBudget, RunConfig, SeedSampling
from genenv.domains import domain_names
from genenv.domains.evaluators import benchmark_names
from genenv.experiments.budget import check_equal_attempts, filter_arm

# The modes an experiment can run: all but those whose attempts come from an outside agent's client.
DRIVEN_MODES = {name for name, mode in MODES.items() if not mode.external_agent}
# Experiment files hold a run config as their `template`; every other example is a run config.
EXPERIMENTS = sorted(EXAMPLES.glob("experiment-*.yaml"))
FILES = sorted(set(EXAMPLES.glob("*.yaml")) - set(EXPERIMENTS))
QUICKSTART = EXAMPLES / "quickstart-arithmetic.yaml"
BASELINES = {
    "random_simulator": EXAMPLES / "baseline-random-simulator.yaml",
    "static_augmentation": EXAMPLES / "baseline-static-augmentation.yaml",
    "agent_only": EXAMPLES / "baseline-agent-only.yaml",
    "generic_rwr": EXAMPLES / "baseline-generic-rwr.yaml",
}
# The learning experiment of issue 35 (docs/experiments/preregistration-learning.md): arm → file.
LEARNING = {
    "main": "experiment-cpu-learning.yaml",
    "filter": "experiment-cpu-learning-filter.yaml",
    "progress": "experiment-cpu-learning-progress.yaml",
    "calibration": "experiment-cpu-learning-calibration.yaml",
}
# Table 2 of the paper (and its released config where marked in METHOD.md), as RunConfig paths.
PAPER = {
    "agent.batch_size": 64,
    "simulator.batch_size": 64,
    "rollouts_per_task": 8,
    "variations_per_seed": 4,
    "epochs": 6,
    "curriculum.k_min": 0.1,
    "curriculum.rwr_lambda": 1.0,
    "curriculum.alpha": 0.5,
    "curriculum.beta": 20.0,
    "agent.kl_coef": 0.001,
    "agent.clip_ratio": 0.2,
    "rollout_temperature": 1.0,
    "agent.max_seq_len": 9000,
}


def _load(path: Path) -> RunConfig:
    return RunConfig.model_validate(yaml.safe_load(path.read_text()))


def _get(config: RunConfig, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _configmap_literal(kustomization: Path, name: str) -> str | None:
    doc = yaml.safe_load(kustomization.read_text())
    for generator in doc.get("configMapGenerator", []):
        for literal in generator.get("literals", []):
            key, _, value = literal.partition("=")
            if key == name:
                return str(value)
    return None


def test_the_examples_exist() -> None:
    names = {p.name for p in FILES}
    assert {"quickstart-arithmetic.yaml", "bfcl-function-calling.yaml", "paper-scale-qwen7b.yaml"} <= names
    assert {p.name for p in BASELINES.values()} <= names
    assert {_load(p).mode for p in FILES} == set(MODES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_is_a_valid_run_config(path: Path) -> None:
    config = _load(path)  # unknown or misspelt keys fail here (RunConfig forbids extra fields)
    assert config.name == path.stem
    assert config.domain in domain_names()
    assert set(config.eval_benchmarks) <= set(benchmark_names())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_lora_rank_fits_the_vllm_servers(path: Path) -> None:
    launch = (REPO / "deploy" / "vllm" / "launch.sh").read_text()
    match = re.search(r"--max-lora-rank (\d+)", launch)
    assert match
    assert _load(path).lora.rank <= int(match.group(1))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_genenv_runs_create_accepts_the_yaml(path: Path, tmp_path: Path) -> None:
    env = {
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "GENENV_SERVICES__CONTROL_PLANE": "inprocess",
        "GENENV_AUTH__TOKENS": "[]",
        # The GPU examples name models by their path in the images' model cache; absolute base_model paths are
        # accepted only under the model roots (the model cache by default).
        "GENENV_PATHS__MODEL_CACHE": "/var/lib/genenv/models",
    }
    result = CliRunner().invoke(app, ["runs", "create", str(path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    run = json.loads(result.output)
    assert run["status"] == "created"
    assert RunConfig.model_validate(run["config"]) == _load(path)


def test_runs_create_rejects_a_misspelt_example(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(QUICKSTART.read_text().replace("rwr_lambda:", "rwr_lamda:"))
    env = {"GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'cli.db'}", "GENENV_SERVICES__CONTROL_PLANE": "inprocess"}
    result = CliRunner().invoke(app, ["runs", "create", str(broken)], env=env)
    assert result.exit_code == 2
    assert "curriculum.rwr_lamda" in result.output


def test_paper_scale_carries_table_2() -> None:
    config = _load(EXAMPLES / "paper-scale-qwen7b.yaml")
    assert {path: _get(config, path) for path in PAPER} == PAPER
    assert config.mode == "genenv"
    # Table 2's 1e-6 / 5e-7 are full fine-tuning rates; the preset trains LoRA adapters, which need ≈10× more.
    assert 5e-6 <= config.agent.learning_rate <= 3e-5
    assert config.simulator.learning_rate <= config.agent.learning_rate


def test_gpu_examples_use_the_model_their_deployment_serves() -> None:
    k8s = REPO / "k8s"
    var = "GENENV_INFERENCE__BASE_MODEL"
    gpu_model = _configmap_literal(k8s / "base" / "kustomization.yaml", var)
    paper_model = _configmap_literal(k8s / "overlays" / "paper-scale" / "kustomization.yaml", var)
    # The gpu overlay keeps base's model.
    assert _configmap_literal(k8s / "overlays" / "gpu" / "kustomization.yaml", var) is None
    assert _load(EXAMPLES / "bfcl-function-calling.yaml").base_model == gpu_model
    assert _load(EXAMPLES / "paper-scale-qwen7b.yaml").base_model == paper_model
    compose = (REPO / "docker-compose.yml").read_text()
    default = re.search(r"GENENV_INFERENCE__BASE_MODEL: (/var/lib/genenv/models/)\$\{GPU_MODEL:-([^}]+)\}", compose)
    assert default and default.group(1) + default.group(2) == paper_model


def test_quickstart_runs_on_the_cpu_model() -> None:
    config = _load(QUICKSTART)
    assert config.base_model == RunConfig().base_model and config.domain == "arithmetic"
    assert config.mode == "genenv"


@pytest.mark.parametrize("mode", list(BASELINES), ids=str)
def test_baselines_differ_from_the_quickstart_only_in_mode(mode: str) -> None:
    quick = _load(QUICKSTART).model_dump()
    baseline = _load(BASELINES[mode]).model_dump()
    assert baseline["mode"] == mode
    differing = {k for k in quick if quick[k] != baseline[k]}
    assert differing <= {"name", "mode", "static_variations"}


def test_examples_readme_lists_every_example() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert {p.name for p in FILES + EXPERIMENTS} == set(re.findall(r"\[`?([\w.-]+\.yaml)`?\]", readme))


def test_the_experiment_presets_exist() -> None:
    assert {p.name for p in EXPERIMENTS} == {
        "experiment-cpu-arithmetic.yaml", "experiment-cpu-arithmetic-wide-band.yaml", "experiment-gpu-bfcl.yaml",
        "experiment-cpu-bfcl-qwen.yaml", "experiment-gpu-bfcl-qwen.yaml", "experiment-cpu-mechanism-loop.yaml",
        *LEARNING.values(),
        "experiment-cpu-two-sided.yaml",
    }


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_experiment_preset_is_valid_and_accepted(path: Path, tmp_path: Path) -> None:
    body = load_experiment(path)
    assert body.name == body.template.name == path.stem
    if body.template.agent.train:  # held-out accuracy every epoch
        assert body.template.eval_every == 1 and body.template.eval_benchmarks
    else:  # a frozen agent never changes: nothing to evaluate
        assert body.template.eval_every == 0
    # The paper's α, except where a pre-registered design moves it to put levels on both sides (level_sides).
    assert body.template.curriculum.alpha == (0.15 if body.level_sides else 0.5)
    if path.name not in LEARNING.values():  # the learning experiment's arms are one file each (below)
        assert {"genenv", "random_simulator"} <= set(body.modes)
    assert body.replicates >= 2  # intervals need replicates
    env = {
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "GENENV_SERVICES__CONTROL_PLANE": "inprocess",
        "GENENV_AUTH__TOKENS": "[]",
        "GENENV_PATHS__MODEL_CACHE": "/var/lib/genenv/models",  # as in test_genenv_runs_create_accepts_the_yaml
    }
    result = CliRunner().invoke(app, ["experiment", "create", str(path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    created = json.loads(result.output)
    assert len(created["members"]) == len(body.modes) * body.replicates
    assert RunConfig.model_validate(created["template"]) == body.template


def test_cpu_preset_is_the_arithmetic_ablation() -> None:
    body = load_experiment(EXAMPLES / "experiment-cpu-arithmetic.yaml")
    assert body.template.domain == "arithmetic" and body.template.eval_benchmarks == ["arithmetic"]
    assert body.template.base_model == "smollm2-135m-instruct" and not body.concurrent
    assert body.modes == ["genenv", "random_simulator", "static_augmentation"]
    assert body.template.curriculum.k_min == 0.1  # the paper's band


def test_wide_band_preset_differs_only_in_the_band() -> None:
    paper = load_experiment(EXAMPLES / "experiment-cpu-arithmetic.yaml")
    wide = load_experiment(EXAMPLES / "experiment-cpu-arithmetic-wide-band.yaml")
    assert wide.template.curriculum.k_min == 0.25 and wide.modes == ["genenv", "random_simulator"]
    same = paper.template.model_copy(update={"name": wide.template.name, "curriculum": wide.template.curriculum})
    assert same == wide.template and wide.replicates == paper.replicates
    assert paper.template.curriculum.model_copy(update={"k_min": 0.25}) == wide.template.curriculum


def test_gpu_preset_carries_table_2() -> None:
    body = load_experiment(EXAMPLES / "experiment-gpu-bfcl.yaml")
    assert {path: _get(body.template, path) for path in PAPER} == PAPER
    assert body.template.eval_benchmarks == ["bfcl"] and body.concurrent
    assert body.template.curriculum.k_min == 0.1
    assert set(body.modes) == DRIVEN_MODES


def test_qwen_presets_run_function_calling_with_bfcl_ast_held_out() -> None:
    cpu = load_experiment(EXAMPLES / "experiment-cpu-bfcl-qwen.yaml")
    gpu = load_experiment(EXAMPLES / "experiment-gpu-bfcl-qwen.yaml")
    for body in (cpu, gpu):
        t = body.template
        assert t.domain == "function_calling" and t.base_model == "qwen2.5-coder-0.5b-instruct"
        assert t.eval_benchmarks == ["bfcl"] and t.eval_splits == {"bfcl": "ast"}
        assert t.curriculum.k_min == 0.1 and t.rollouts_per_task == 8
        # BFCL prompts with Qwen's tokenizer reach ≈ 1,000 tokens at p90: shorter limits would skip sequences.
        assert t.agent.max_seq_len >= 2048 and t.simulator.max_seq_len >= 3072
    assert cpu.modes == ["genenv", "random_simulator", "static_augmentation"]
    assert cpu.replicates == 2 and not cpu.concurrent
    assert set(gpu.modes) == DRIVEN_MODES and gpu.replicates == 3 and gpu.concurrent


def test_learning_arms_share_everything_but_their_curriculum_at_equal_agent_attempts() -> None:
    main, filt, progress, calibration = (load_experiment(EXAMPLES / LEARNING[k])
                                         for k in ("main", "filter", "progress", "calibration"))
    assert main.modes == ["genenv", "static_augmentation"]
    assert filt.modes == progress.modes == ["random_simulator"]
    assert main.seeds() == filt.seeds() == progress.seeds()  # paired by replicate seed across the files
    t = main.template
    arms = {
        "genenv": t,
        "static_augmentation": t.model_copy(update={"mode": "static_augmentation"}),
        "filter": filt.template,
        "learning_progress": progress.template,
    }
    assert check_equal_attempts(arms) == 40 * 4 * 8
    # The filter arm is filter_arm of genenv's template with 8 variations, nothing else changed (the template's
    # own mode is not used: the member's mode is the file's).
    assert filt.template == filter_arm(t, 8).model_copy(update={"name": filt.template.name,
                                                                "mode": filt.template.mode})
    assert filt.template.agent.budget is GrpoBudget.INFORMATIVE and t.agent.budget is GrpoBudget.TASKS
    assert progress.template.seed_sampling is SeedSampling.LEARNING_PROGRESS
    assert progress.template == t.model_copy(update={
        "name": progress.template.name, "seed_sampling": SeedSampling.LEARNING_PROGRESS,
        "learning_progress": progress.template.learning_progress})
    # The calibration runs the same template under static_augmentation, on its own fresh seeds, at the grid's
    # first dose.
    assert calibration.modes == ["static_augmentation"] and calibration.replicates == 3
    assert not set(calibration.seeds()) & set(main.seeds())
    agent = t.agent.model_copy(update={"learning_rate": 5e-5, "max_steps_per_epoch": 1})
    assert calibration.template == t.model_copy(update={"name": calibration.template.name, "agent": agent})
    assert t.eval_splits == {"arithmetic": "heldout"} and t.eval_limit is None and t.agent.train


def test_two_sided_preset_is_the_pre_registered_design() -> None:
    body = load_experiment(EXAMPLES / "experiment-cpu-two-sided.yaml")
    t = body.template
    assert body.modes == ["genenv", "random_simulator", "generic_rwr"]
    assert body.replicates == 8 and body.random_seeds is not None and len(set(body.random_seeds)) == 8
    assert (t.curriculum.alpha, t.curriculum.k_min, t.agent.train, t.curriculum.prompt_stats) == (0.15, 0.1, False,
                                                                                                   False)
    # Every arithmetic level has a side, fixed from the pilot's p̂ (above α = 0.15: 0.23-0.33; below: 0.06-0.11).
    assert body.level_sides == {"1d-add": "above", "1d-mul": "above", "1d-addsub": "above", "2d-add": "below",
                                "1d-3op": "below", "2d-3op": "below", "3d-add": "below"}
    assert t.seeds_per_epoch % len(body.level_sides) == 0 and t.seed_sampling.value == "stratified"
    assert (t.simulator.learning_rate, t.simulator.max_steps_per_epoch, t.simulator.passes_per_epoch) == (1e-3, 4, 4)
