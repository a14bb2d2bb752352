#!/usr/bin/env bash
# Download the cp312 manylinux x86_64 wheels a GPU machine lacks (deploy/gpu/requirements-gpu-check.txt, pinned by
# version and sha256) into DEST (default .whl, git-ignored) and print their total size, which travels with the tree.
# Needs PyPI; the machine that installs them needs none (docs/deployment.md, "A GPU check").
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${1:-.whl}"
python="${PYTHON:-python3}"
mkdir -p "$dest"
# Several manylinux tags: pip matches a tag exactly, and these wheels carry 2014/2_17, 2_24/2_28 or 2_27/2_28.
"$python" -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$dest" -r deploy/gpu/requirements-gpu-check.txt
expected=$(grep -c -- '--hash=' deploy/gpu/requirements-gpu-check.txt)
found=$(find "$dest" -maxdepth 1 -type f -name '*.whl' | wc -l)
if [ "$found" -ne "$expected" ]; then
  echo "error: $dest holds $found wheels, the list pins $expected (remove stale wheels: pip takes one version each)" >&2
  exit 1
fi
du -b "$dest"/*.whl | awk '{t += $1; n = split($2, p, "/"); printf "%10.2f MiB  %s\n", $1 / 1048576, p[n]}
  END {printf "%10.2f MiB  total, %d wheels\n", t / 1048576, NR}'
