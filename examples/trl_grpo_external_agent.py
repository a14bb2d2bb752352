"""Train your agent with TRL's GRPOTrainer on the tasks an external_agent run's simulator writes for it.

The dataset leases the run's tasks, GRPO samples the run's ``rollouts_per_task`` completions per task (one GRPO
group), and the reward function reports them and returns the service's verdicts; the simulator is trained on your
agent's success rates between epochs (docs/external-agent.md, section 2b). Needs ``pip install -e '.[train,trl]'``.

    export GENENV_URL=http://127.0.0.1:8000 GENENV_TOKEN=...          # as `genenv up` prints them
    genenv runs create examples/external-agent-arithmetic.yaml         # then: genenv runs start RUN_ID
    python examples/trl_grpo_external_agent.py --run-id RUN_ID --model ~/.genenv/models/smollm2-135m-instruct

It prints TRL's log line per step and, at the end, what was leased, reported and refused.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from genenv.clients.external_agent import ExternalAgentClient
from genenv.integrations.trl import LeaseSource, ServiceReward, check_grpo_args, leased_dataset


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description="TRL GRPOTrainer as the outside agent of an external_agent run.")
    p.add_argument("--run-id", required=True, help="The external_agent run whose tasks to train on (started).")
    p.add_argument("--model", type=Path, required=True, help="Your agent: a local model folder (no hub download).")
    p.add_argument("--steps", type=int, default=20, help="Optimizer steps (TRL's max_steps).")
    p.add_argument("--prompts", type=int, default=4, help="Tasks per generation batch (each gets G completions).")
    p.add_argument("--learning-rate", type=float, default=1e-5, help="The agent's learning rate.")
    p.add_argument("--max-completion-length", type=int, default=24, help="New tokens per completion.")
    p.add_argument("--lease-s", type=int, default=600,
                   help="Seconds a lease holds its tasks. At least two optimizer steps: accelerate leases one batch "
                   "ahead, answered a step later (at 120 s, with ~70 s steps on a loaded 2-core CPU, that batch's "
                   "report came back 409 lease_expired). No longer than needed: when training stops, the batch read "
                   "ahead is never answered and its tasks return to the pool only after this.")
    p.add_argument("--output-dir", type=Path, default=Path("trl-out"), help="TRL's output folder.")
    p.add_argument("--url", default=os.environ.get("GENENV_URL"), help="Control plane (default $GENENV_URL).")
    p.add_argument("--token", default=os.environ.get("GENENV_TOKEN"), help="Bearer token (default $GENENV_TOKEN).")
    args = p.parse_args(argv)
    if not args.url:
        p.error("no control plane: give --url or set GENENV_URL")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Train, then print what the run recorded of it; 0 when every reported completion was recorded."""
    args = parse_args(argv)
    # Imported here: `--help` answers at once and without the trl extra. (trl exports these lazily, which mypy
    # cannot see.)
    from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]

    with ExternalAgentClient(args.url, token=args.token) as client:
        # G must be the run's rollouts_per_task: a task's leased attempts are exactly one GRPO group.
        group = client.get_run(args.run_id).config.rollouts_per_task
        config = GRPOConfig(
            output_dir=str(args.output_dir), max_steps=args.steps, num_generations=group,
            per_device_train_batch_size=args.prompts * group, max_completion_length=args.max_completion_length,
            shuffle_dataset=False, learning_rate=args.learning_rate, logging_steps=1, report_to=[],
            save_strategy="no", use_cpu=True, seed=0,
        )
        check_grpo_args(config, args.prompts)
        source = LeaseSource(client, args.run_id, prompts_per_batch=args.prompts, lease_s=args.lease_s)
        reward = ServiceReward(client, args.run_id)
        trainer = GRPOTrainer(model=str(args.model), args=config, train_dataset=leased_dataset(source),
                              reward_funcs=[reward])
        trainer.train()
        reported = sum(len(r.verdicts) for r in reward.reports)
        print(f"steps {trainer.state.global_step} · tasks leased {source.leased} · completions reported {reported} "
              f"· refused {len(reward.refused)}")
        return 0 if not reward.refused else 1


if __name__ == "__main__":
    raise SystemExit(main())
