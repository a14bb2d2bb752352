#!/usr/bin/env python3
"""Write shared/genenv/data/manifest.json: every benchmark file `genenv data fetch` downloads, with its sha256.

The checksums are those of a complete local copy of the data (``--data``, e.g. ../shared/benchmarks). Each file is
also compared with its upstream bytes where a copy of the upstream is at hand, and the manifest records how:

  python deploy/scripts/gen_data_manifest.py --data ../shared/benchmarks \
      --mirror AlibabaResearch/DAMO-ConvAI=/path/to/a/git/clone ...  --wheel bfcl_eval-2026.3.23-py3-none-any.whl

``--mirror OWNER/NAME=GITDIR`` compares each file with the blob at the pinned commit (git's blob hash of the local
file must equal the tree entry's); ``--wheel`` compares BFCL's files with the wheel's members. A file that differs
from an available upstream stops the script; sources without an upstream copy are recorded as not verified.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from genenv.data.derive import DERIVATIONS
from genenv.data.manifest import Manifest

TARGET = Path(__file__).resolve().parents[2] / "shared" / "genenv" / "data" / "manifest.json"
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/"


@dataclass(frozen=True)
class Git:
    """Files of a GitHub repository at a pinned commit: (upstream prefix, local prefix) pairs; a trailing '/' maps a
    whole folder (every local file under it), otherwise one file."""

    id: str
    repo: str
    commit: str
    mapping: tuple[tuple[str, str], ...]
    unverified: str = "checksums of the local copy; not compared with the upstream repository"


@dataclass(frozen=True)
class Wheel:
    """Files of a pinned PyPI wheel: (member prefix, local prefix) pairs as for Git."""

    id: str
    distribution: str
    version: str
    sha256: str
    mapping: tuple[tuple[str, str], ...]
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spec:
    title: str
    licence: str
    revision: str
    official: str
    sources: tuple[Git | Wheel, ...]
    derived: dict[str, str] = field(default_factory=dict)  # local path -> derivation name


DAMO = "AlibabaResearch/DAMO-ConvAI"
TP = "OSU-NLP-Group/TravelPlanner"
SPECS: dict[str, Spec] = {
    "api_bank": Spec(
        title="API-Bank (Li et al., EMNLP 2023)",
        licence="Apache-2.0",
        revision=f"{DAMO}@5d5a2d40 (test-data) + @483554ea",
        official=f"GitHub {DAMO}, folder api-bank/. test-data/ was deleted upstream in a09c97b3 (moved to the Hugging "
        "Face dataset liminghao1630/API-Bank), so it is pinned at that commit's parent 5d5a2d40.",
        sources=(
            Git("damo-test-data", DAMO, "5d5a2d40b2e6b6998a06961cc43ad0a8c069b153",
                (("api-bank/test-data/", "test-data/"),)),
            Git("damo-head", DAMO, "483554eae102996f5ec1f4feab4e78ef29c2a394",
                (("api-bank/lv1-lv2-samples/", "lv1-lv2-samples/"), ("api-bank/lv3-samples/", "lv3-samples/"),
                 ("api-bank/init_database/", "init_database/"), ("api-bank/data/", "apis_meta/"))),
        ),
    ),
    "bamboogle": Spec(
        title="Bamboogle (Press et al., 2022)",
        licence="not stated (research use, cite the paper)",
        revision="chenyiqun/Agentic-RAG@a6694e2e",
        official="A Google Sheet linked from GitHub ofirpress/self-ask (no data file in the repository); the usual "
        "copies are the Hugging Face datasets chiayewken/bamboogle and RUC-NLPIR/FlashRAG_datasets. The pinned file "
        "is a GitHub copy of the 125 question/answer pairs; test.jsonl is derived from it.",
        sources=(Git("agentic-rag", "chenyiqun/Agentic-RAG", "a6694e2ebfa1a3fcbbbe4a5607f6317ba70ddc40",
                     (("data/bamboogle/bamboogle_test_questions_and_answers.json",
                       "bamboogle_test_questions_and_answers.json"),)),),
        derived={"test.jsonl": "bamboogle_jsonl"},
    ),
    "bfcl": Spec(
        title="Berkeley Function Calling Leaderboard, V4 data",
        licence="Apache-2.0",
        revision="bfcl-eval==2026.3.23 (= ShishirPatil/gorilla@6ea57973)",
        official="The bfcl-eval package on PyPI ships the data (bfcl_eval/data/); it equals GitHub "
        "ShishirPatil/gorilla, berkeley-function-call-leaderboard/bfcl_eval/data/ at 6ea57973. The retired "
        "unused_datasets/ are left out.",
        sources=(Wheel("bfcl-eval", "bfcl-eval", "2026.3.23",
                       "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
                       (("bfcl_eval/data/README.md", "UPSTREAM_DATA_README.md"), ("bfcl_eval/data/", "")),
                       skip=("README.md",)),),
    ),
    "alfworld": Spec(
        title="ALFWorld (Shridhar et al., ICLR 2021): TextWorld games of valid_seen and valid_unseen",
        licence="MIT",
        revision="jiangmin8/lz-tool-skillopt@76b659f3 (game files >= 2.1.2, as alfworld 0.4.2)",
        official="GitHub alfworld/alfworld release assets (0.4.2/json_2.1.3_tw-pddl.zip, fetched by "
        "alfworld-download) — one zip with every split, whose checksum could not be established here. The pinned "
        "source is a GitHub copy of the same game files, fetched per file; games_index.jsonl is derived from them.",
        sources=(Git("lz-tool-skillopt", "jiangmin8/lz-tool-skillopt", "76b659f30553611066647d477cf72198fed3ef3d",
                     (("json_2.1.1/valid_seen/", "json_2.1.1/valid_seen/"),
                      ("json_2.1.1/valid_unseen/", "json_2.1.1/valid_unseen/"))),),
        derived={"games_index.jsonl": "alfworld_index"},
    ),
    "travelplanner": Spec(
        title="TravelPlanner (Xie et al., ICML 2024): validation split, sandbox database, train references",
        licence="MIT (database), CC-BY-4.0 (queries)",
        revision=f"{TP}@958f30d7 (database) + @da7c1d41 (queries) + rt4x724b6m-ship-it/b-magent@9c51585d "
        "(validation.csv)",
        official=f"GitHub {TP} (the database was deleted upstream after 958f30d7 and now points to a Google Drive "
        "zip) and the Hugging Face dataset osunlp/TravelPlanner (validation.csv, not reachable for checksums here; "
        "the pinned copy is a GitHub redistribution of it). The full flights table is not public in a fetchable "
        "form: database/flights_from_validation_reference.csv is derived from the validation rows' reference "
        "information.",
        sources=(
            Git("travelplanner-database", TP, "958f30d7e7629d18f33d79183dedf9b2830ff88c",
                (("database/accommodations/clean_accommodations_2022.csv",
                  "database/accommodations/clean_accommodations_2022.csv"),
                 ("database/attractions/attractions.csv", "database/attractions/attractions.csv"),
                 ("database/background/citySet.txt", "database/background/citySet.txt"),
                 ("database/background/citySet_with_states.txt", "database/background/citySet_with_states.txt"),
                 ("database/background/stateSet.txt", "database/background/stateSet.txt"),
                 ("database/googleDistanceMatrix/distance.csv", "database/googleDistanceMatrix/distance.csv"),
                 ("database/restaurants/clean_restaurant_2022.csv", "database/restaurants/clean_restaurant_2022.csv"))),
            Git("travelplanner-head", TP, "da7c1d41d51bf1d6e8592099bc109c9368b2dfe4",
                (("database/README.md", "database/UPSTREAM_DATABASE_README.md"),
                 ("database/train_ref_info.jsonl", "queries/train_ref_info.jsonl"),
                 ("finetuning_data/std_travelplanner.jsonl", "queries/train_sft_std_travelplanner.jsonl"),
                 ("postprocess/example_evaluation.jsonl", "queries/validation_example_submission.jsonl"))),
            Git("b-magent", "rt4x724b6m-ship-it/b-magent", "9c51585dc0816613bcb85bbb805247721dd8b405",
                (("data/TravelPlanner/validation.csv", "validation.csv"),),
                unverified="NOT byte-verified: no stored copy of this 4.8 MB file was at hand; the checksum is that of "
                "the local copy, rebuilt from a page-by-page reading of it (same length, 816 anchors matched at exact "
                "offsets; benchmarks/travelplanner/README.md). A first real download that fails verification means "
                "that copy differs from upstream."),
        ),
        derived={"database/flights_from_validation_reference.csv": "travelplanner_flights"},
    ),
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob(data: bytes) -> str:
    """git's object id of a blob with these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def expand(mapping: tuple[tuple[str, str], ...], local_root: Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(upstream path, local path) for every file a mapping names (folders: the files present locally)."""
    pairs: list[tuple[str, str]] = []
    taken: set[str] = set()
    for upstream, local in mapping:
        if upstream.endswith("/"):
            folder = local_root / local if local else local_root
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                rel = path.relative_to(local_root).as_posix()
                if rel in taken or rel in skip:
                    continue
                pairs.append((upstream + path.relative_to(folder).as_posix(), rel))
                taken.add(rel)
        else:
            pairs.append((upstream, local))
            taken.add(local)
    return pairs


def tree_blobs(git_dir: Path, commit: str) -> dict[str, str]:
    """path -> blob id of every file at ``commit``."""
    out = subprocess.run(["git", "-C", str(git_dir), "ls-tree", "-r", commit], capture_output=True, text=True,
                         check=True).stdout
    blobs = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        blobs[path] = meta.split()[2]
    return blobs


def build(data: Path, mirrors: dict[str, Path], wheel: Path | None) -> dict[str, object]:
    benchmarks: dict[str, object] = {}
    for name, spec in SPECS.items():
        root = data / name
        sources, files = [], []
        for src in spec.sources:
            if isinstance(src, Wheel):
                pairs = expand(src.mapping, root, src.skip)
                verified = "not compared with the wheel"
                if wheel is not None:
                    if sha256(wheel.read_bytes()) != src.sha256:
                        sys.exit(f"{wheel}: sha256 differs from the pinned {src.sha256}")
                    with zipfile.ZipFile(wheel) as zf:
                        for member, local in pairs:
                            if zf.read(member) != (root / local).read_bytes():
                                sys.exit(f"{name}/{local} differs from {wheel.name}:{member}")
                    verified = (f"all {len(pairs)} files compared byte for byte with the members of "
                                f"{wheel.name} (sha256 {src.sha256}, pinned by pip --require-hashes)")
                gorilla = mirrors.get("ShishirPatil/gorilla")
                if gorilla is not None:
                    blobs = tree_blobs(gorilla, "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8")
                    prefix = "berkeley-function-call-leaderboard/"
                    bad = [m for m, local in pairs if blobs.get(prefix + m) != git_blob((root / local).read_bytes())]
                    if bad:
                        sys.exit(f"{name}: differs from ShishirPatil/gorilla@6ea57973: {bad[:5]}")
                    verified += "; and each equals its blob in ShishirPatil/gorilla@6ea57973 (git blob hash)"
                sources.append({"id": src.id, "kind": "wheel", "label": f"PyPI {src.distribution}",
                                "revision": src.version, "distribution": src.distribution,
                                "wheel_sha256": src.sha256, "verified": verified})
            else:
                pairs = expand(src.mapping, root)
                mirror = mirrors.get(src.repo)
                if mirror is None:
                    verified = src.unverified
                else:
                    blobs = tree_blobs(mirror, src.commit)
                    bad = [m for m, local in pairs if blobs.get(m) != git_blob((root / local).read_bytes())]
                    if bad:
                        sys.exit(f"{name}: {len(bad)} files differ from {src.repo}@{src.commit[:8]}: {bad[:5]}")
                    verified = (f"all {len(pairs)} files byte-identical to {src.repo}@{src.commit[:8]} (the git "
                                "blob hash of each local file equals the tree entry at that commit)")
                sources.append({"id": src.id, "kind": "http", "label": f"GitHub {src.repo}", "revision": src.commit,
                                "base_url": RAW.format(repo=src.repo, commit=src.commit), "verified": verified})
            for member, local in pairs:
                body = (root / local).read_bytes()
                files.append({"path": local, "sha256": sha256(body), "size": len(body), "source": src.id,
                              "member": member})
        for local, derivation in spec.derived.items():
            body = (root / local).read_bytes()
            if DERIVATIONS[derivation](root) != body:
                sys.exit(f"{name}/{local}: genenv.data.derive.{derivation} does not reproduce the local file")
            files.append({"path": local, "sha256": sha256(body), "size": len(body), "source": "derived",
                          "derive": derivation})
        benchmarks[name] = {"title": spec.title, "licence": spec.licence, "revision": spec.revision,
                            "official": spec.official, "sources": sources, "files": files}
    manifest = {"format": 1, "benchmarks": benchmarks}
    Manifest.model_validate(manifest)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a complete copy of the benchmark data")
    parser.add_argument("--mirror", action="append", default=[], help="OWNER/NAME=GITDIR (repeatable)")
    parser.add_argument("--wheel", type=Path, help="the pinned bfcl-eval wheel")
    parser.add_argument("--output", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    mirrors = {k: Path(v) for k, v in (m.split("=", 1) for m in args.mirror)}
    manifest = build(args.data, mirrors, args.wheel)
    args.output.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(b["files"]) for b in manifest["benchmarks"].values())  # type: ignore[attr-defined]
    print(f"wrote {args.output} ({n} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
