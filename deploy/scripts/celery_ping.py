#!/usr/bin/env python3
"""Health probe for a GenEnv Celery worker: ping this container's worker node through the broker.

Exit 0 when the node answers ``pong`` within the timeout, 1 otherwise. Used by Docker HEALTHCHECKs, compose
healthchecks and Kubernetes exec probes. ``%h`` in ``--node`` is this host's name (Celery's own convention),
so one probe command works for every replica.

  celery_ping.py --node 'rollout@%h' --timeout 10
"""

from __future__ import annotations

import argparse
import socket
import sys

from genenv.queue import make_celery
from genenv.settings import GenEnvSettings


def node_name(pattern: str, hostname: str | None = None) -> str:
    """Expand Celery's ``%h`` (full host name) in a node-name pattern."""
    return pattern.replace("%h", hostname or socket.gethostname())


def ping(node: str, timeout: float) -> bool:
    """True when ``node`` replies to a broadcast ping before ``timeout`` seconds."""
    app = make_celery(GenEnvSettings())
    try:
        replies = app.control.ping(destination=[node], timeout=timeout)
    finally:
        app.close()
    return any(reply.get(node, {}).get("ok") == "pong" for reply in replies or [])


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when the worker answered, 1 when it did not."""
    parser = argparse.ArgumentParser(description="Ping this container's Celery worker.")
    parser.add_argument("--node", default="celery@%h", help="worker node name; %%h = host name (default celery@%%h)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the reply (default 10)")
    args = parser.parse_args(argv)
    node = node_name(args.node)
    try:
        ok = ping(node, args.timeout)
    except Exception as exc:  # any broker error means "not healthy": reported, never raised
        print(f"celery_ping: {node}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if not ok:
        print(f"celery_ping: no pong from {node} within {args.timeout:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
