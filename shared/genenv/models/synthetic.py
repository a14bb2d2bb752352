"""Random-initialised models of a real model's shape, for measuring speed and memory where the weights cannot travel.

A GPU check needs Qwen2.5-7B's shape (28 layers, hidden 3,584, 152k vocabulary) but not its 15 GB of weights:
step time and memory depend on the shapes alone. The upstream ``config.json`` files are kept in ``configs/``
(copied from the Hugging Face repositories, unchanged), the model is built from one on the target device with
transformers' own initialisation, and a byte-level tokenizer (256 byte tokens and ChatML's special tokens, built
here with ``tokenizers``) stands in where a model folder needs one. Nothing here is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).with_name("configs")
QWEN_7B = "qwen2.5-7b-instruct"
QWEN_05B = "qwen2.5-0.5b-instruct"

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen's and SmolLM2's template (ChatML), without a default system prompt.
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Keys of a hub config.json that describe the file, not the model (and warn when passed to a config class).
_FILE_KEYS = ("architectures", "torch_dtype", "transformers_version")


def load_config(name: str) -> dict[str, Any]:
    """The kept ``config.json`` of ``name`` (a file stem in configs/: qwen2.5-7b-instruct, qwen2.5-0.5b-instruct)."""
    path = CONFIGS / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CONFIGS.glob("*.json")))
        raise KeyError(f"no kept config {name!r}; known: {known}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def shrink(config: dict[str, Any], *, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
           intermediate: int = 128, vocab: int = 512) -> dict[str, Any]:
    """The same architecture at toy sizes (CPU smoke runs and parity checks): every other key kept."""
    return {**config, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "intermediate_size": intermediate, "vocab_size": vocab,
            "max_window_layers": layers, "bos_token_id": None, "eos_token_id": None}


def parameter_count(config: dict[str, Any]) -> dict[str, int]:
    """Parameters of a Llama/Qwen2-style decoder from its config: the transformer blocks' linear weights (what a
    token's forward pass multiplies by), the embedding and the LM head (shared when tied)."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head_dim
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * inter  # q, o; k, v; gate, up, down
    embedding = config["vocab_size"] * h
    return {"blocks": layers * per_layer, "embedding": embedding,
            "head": 0 if config.get("tie_word_embeddings") else embedding}


def random_model(config: dict[str, Any], *, device: str = "cpu", dtype: str = "bfloat16", seed: int = 0) -> Any:
    """A transformers causal LM of ``config``'s shape with transformers' random initialisation, built directly on
    ``device`` (a 7B model never passes through host memory), in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in config.items() if k not in _FILE_KEYS}
    model_type = fields.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    # Should a transformers version build on the CPU despite the device context, move it rather than train a model
    # on one device with batches on another (a no-op when it is where it should be).
    return model.to(device).eval()


def byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer without merges (one token per byte, ids 0–255, then ChatML's special tokens),
    with the ChatML template: any text round-trips, and it needs no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(SPECIAL_TOKENS))
    eos, pad = SPECIAL_TOKENS[2], SPECIAL_TOKENS[0]
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=pad)
    tok.chat_template = CHATML
    return tok


def save_random_model(config: dict[str, Any], folder: Path, *, dtype: str = "bfloat16", seed: int = 0,
                      device: str = "cpu") -> Path:
    """A loadable model folder (safetensors weights, byte tokenizer, end-of-turn as eos) of ``config``'s shape."""
    tok = byte_tokenizer()
    if config["vocab_size"] < len(tok):
        raise ValueError(f"vocab_size {config['vocab_size']} is smaller than the byte tokenizer's {len(tok)} tokens")
    model = random_model({**config, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id,
                          "bos_token_id": None}, device=device, dtype=dtype, seed=seed)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder
