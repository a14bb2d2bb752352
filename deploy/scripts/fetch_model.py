#!/usr/bin/env python3
"""Download a model from the Hugging Face Hub into a folder once (GPU deployments' model init step).

A finished folder (one holding config.json) is left alone, so reruns are cheap no-ops. Runs in the vLLM GPU
image, which ships huggingface_hub; set HF_TOKEN for gated models.

  fetch_model.py Qwen/Qwen2.5-7B-Instruct /var/lib/genenv/models/Qwen/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when the folder holds the model afterwards."""
    parser = argparse.ArgumentParser(description="Download a hub model into a local folder (idempotent).")
    parser.add_argument("repo_id", help="hub repository, e.g. Qwen/Qwen2.5-7B-Instruct")
    parser.add_argument("target", type=Path, help="folder to fill (the value of GENENV_INFERENCE__BASE_MODEL)")
    parser.add_argument("--revision", default=None, help="branch, tag or commit to pin (default: main)")
    args = parser.parse_args(argv)
    if (args.target / "config.json").exists():
        print(f"fetch_model: {args.target} already holds a model")
        return 0
    # Images set HF_HUB_OFFLINE=1 so that serving never reaches the hub; this step is the one that may.
    os.environ["HF_HUB_OFFLINE"] = "0"
    from huggingface_hub import snapshot_download

    # Download beside the target and rename when complete: waiters treat config.json as "model ready", and
    # a partial download must never look finished. A rerun resumes the partial folder.
    partial = args.target.with_name(args.target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    snapshot_download(
        repo_id=args.repo_id,
        revision=args.revision,
        local_dir=str(partial),
        allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken"],
    )
    if not (partial / "config.json").exists():
        print(f"fetch_model: {args.repo_id} has no config.json", file=sys.stderr)
        return 1
    if args.target.exists():
        args.target.rmdir()  # only an empty leftover can be here: a finished one returned above
    partial.rename(args.target)
    print(f"fetch_model: {args.repo_id} -> {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
