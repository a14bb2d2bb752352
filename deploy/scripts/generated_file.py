"""The command line both generators share: write a generated file, or with --check say whether it is current."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def generator_main(
    argv: list[str] | None, *, what: str, target: Path, script: str, render: Callable[[], str], summary: str
) -> int:
    """Parse ``--check``/``--output``, then write ``render()`` to the file or compare it (exit 1 when stale)."""
    parser = argparse.ArgumentParser(description=f"Generate {what}.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from the generated text")
    parser.add_argument("--output", type=Path, default=target, help="file to write or check")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text)
    print(f"wrote {args.output} ({summary})")
    return 0
