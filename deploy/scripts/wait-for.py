#!/usr/bin/env python3
"""Wait until TCP/HTTP endpoints answer (or files exist), then optionally exec a command.

Standard library only, so it runs in every image (app, trainer, upstream vLLM). Targets:
  tcp://HOST:PORT                     a TCP connect succeeds
  http://… / https://…                a GET returns 2xx
  file:///PATH                        the file exists (e.g. a model folder's config.json on a shared volume)
  postgresql+psycopg://…, redis://…   the URL's host and port accept TCP (credentials are ignored)
``--from-env VAR`` reads a target from an environment variable, which keeps passwords off command lines.

  wait-for.py --timeout 120 --from-env GENENV_DATABASE__URL tcp://redis:6379 -- genenv db upgrade
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_PORTS = {"postgresql": 5432, "postgres": 5432, "redis": 6379, "rediss": 6379, "tcp": 0}


def _tcp_ok(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _http_ok(url: str, timeout: float) -> bool:
    try:
        # The scheme is checked by the caller (http/https only), so no file:// or custom scheme reaches here.
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def check(target: str, timeout: float = 3.0) -> bool:
    """True when ``target`` is reachable right now."""
    parts = urlsplit(target)
    scheme = parts.scheme.split("+", 1)[0].lower()
    if scheme in ("http", "https"):
        return _http_ok(target, timeout)
    if scheme == "file":
        return Path(parts.path).exists()
    if scheme in DEFAULT_PORTS:
        port = parts.port or DEFAULT_PORTS[scheme]
        if not parts.hostname or not port:
            raise ValueError(f"target {redact(target)!r} needs a host and a port")
        return _tcp_ok(parts.hostname, port, timeout)
    raise ValueError(f"unsupported target {redact(target)!r}: use tcp://, http(s)://, file://, postgresql://, redis://")


def redact(target: str) -> str:
    """The target without its password, for messages."""
    parts = urlsplit(target)
    if parts.password is None:
        return target
    return target.replace(f":{parts.password}@", ":***@", 1)


def wait(targets: list[str], timeout: float, interval: float) -> list[str]:
    """Poll until every target answers or ``timeout`` seconds pass; return the ones still down."""
    deadline = time.monotonic() + timeout
    pending = list(targets)
    while True:
        pending = [t for t in pending if not check(t, timeout=min(3.0, max(timeout, 0.1)))]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(interval)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Split ``argv`` at ``--`` into wait-for options and the command to exec."""
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("targets", nargs="*", help="tcp://, http(s)://, file://, postgresql://, redis:// URLs")
    parser.add_argument("--from-env", action="append", default=[], metavar="VAR", help="read a target from VAR")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait in total (default 60)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between attempts (default 1)")
    return parser.parse_args(argv), command


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 when all targets answered (or exec the command), 1 on timeout, 2 on bad usage."""
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    targets = list(args.targets)
    for var in args.from_env:
        value = os.environ.get(var, "")
        if not value:
            print(f"wait-for: environment variable {var} is empty", file=sys.stderr)
            return 2
        targets.append(value)
    try:
        down = wait(targets, args.timeout, args.interval)
    except ValueError as exc:
        print(f"wait-for: {exc}", file=sys.stderr)
        return 2
    if down:
        names = ", ".join(redact(t) for t in down)
        print(f"wait-for: not reachable after {args.timeout:g} s: {names}", file=sys.stderr)
        return 1
    if command:
        os.execvp(command[0], command)  # noqa: S606 - replacing this process is the point (PID 1 in a container)
    return 0


if __name__ == "__main__":
    sys.exit(main())
