"""Published configurations of real models (``CONFIGS``), and a random-weight model built
from one with the embedded model's tokenizer (``build_model``): the real architecture, its
FLOPs and memory, with no download (``bench_sizes.py``, ``device_check.sh``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Refused


@dataclass(frozen=True)
class Spec:
    """A published configuration: the model type and its config.json's sizes (rope,
    windows and layer kinds included), the dtype it is run in, and whether its answers
    are also compared with the same weights in fp32 (where both fit in memory)."""

    model_type: str
    config: dict[str, Any]
    source: str
    dtype: str = "float32"
    compare_fp32: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


_LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}  # fmt: skip
_LLAMA_3_2_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                     vocab_size=128256, tie_word_embeddings=True, rope_theta=500000.0,
                     rms_norm_eps=1e-5, max_position_embeddings=131072,
                     rope_scaling={**_LLAMA3_ROPE, "factor": 32.0})  # fmt: skip
# Gemma 3 1B: five sliding layers (a 512-token window) to one full, 26 layers.
_GEMMA_LAYERS = (["sliding_attention"] * 5 + ["full_attention"]) * 4 + ["sliding_attention"] * 2

# The embedded tokenizer's ids run to 49,152: only vocabularies at least that large
# (Mistral's 32,768 and Phi-3's 32,064 are not).
CONFIGS: dict[str, Spec] = {
    "qwen2.5-0.5b": Spec("qwen2", dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1e6,
        rms_norm_eps=1e-6, max_position_embeddings=32768, use_sliding_window=False,
        sliding_window=None, max_window_layers=24), "Qwen/Qwen2.5-0.5B"),
    "llama-3.2-1b": Spec("llama", _LLAMA_3_2_1B, "meta-llama/Llama-3.2-1B"),
    "gemma-3-1b": Spec("gemma3_text", dict(
        hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, vocab_size=262144, sliding_window=512,
        layer_types=_GEMMA_LAYERS, query_pre_attn_scalar=256, rope_theta=1e6,
        rope_local_base_freq=10000.0, max_position_embeddings=32768, rms_norm_eps=1e-6),
        "google/gemma-3-1b-pt"),
    "olmo-2-1b": Spec("olmo2", dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=100352, rope_theta=500000.0, rms_norm_eps=1e-6,
        max_position_embeddings=4096, tie_word_embeddings=False), "allenai/OLMo-2-0425-1B"),
    "qwen3-1.7b": Spec("qwen3", dict(
        hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
        rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=40960), "Qwen/Qwen3-1.7B"),
    "llama-3.2-3b": Spec("llama", dict(
        _LLAMA_3_2_1B, hidden_size=3072, num_hidden_layers=28, num_attention_heads=24,
        head_dim=128), "meta-llama/Llama-3.2-3B"),
    # bf16 against bf16 and against the same weights in fp32.
    "llama-3.2-1b-bf16": Spec("llama", _LLAMA_3_2_1B, "meta-llama/Llama-3.2-1B",
                              dtype="bfloat16", compare_fp32=True),  # fmt: skip
    "llama-3.1-8b": Spec("llama", dict(
        _LLAMA_3_2_1B, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        head_dim=128, tie_word_embeddings=False, rope_scaling={**_LLAMA3_ROPE, "factor": 8.0}),
        "meta-llama/Llama-3.1-8B", dtype="bfloat16"),
    # CI's run of benchmarks/device_check.sh: the same code in seconds.
    "tiny-llama": Spec("llama", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=49152, max_position_embeddings=2048),
        "a made-up 2-layer Llama", dtype="bfloat16", compare_fp32=True),
}  # fmt: skip


def build_model(
    spec: Spec, folder: Path, tokenizer_dir: str | None, device: str = "cpu"
) -> dict[str, int]:
    """Save a random-weight model of ``spec`` with the tokenizer in ``folder`` (kept if
    there), its weights drawn on ``device``; its parameter counts."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = load_tokenizer(tokenizer_dir)
    config = AutoConfig.for_model(
        spec.model_type,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **spec.config,
    )
    if (folder / "config.json").exists():
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return parameter_counts(model)
    torch.manual_seed(0)
    with torch.device(device):  # on a GPU, an 8B model's weights drawn in seconds
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, spec.dtype))
    counts = parameter_counts(model)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    return counts


def parameter_counts(model: Any) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    layers = sum(
        p.numel()
        for name, p in model.named_parameters()
        if "embed" not in name and "lm_head" not in name
    )
    config = model.config
    return {"total": total, "non_embedding": layers,
            "head": config.hidden_size * config.vocab_size}  # fmt: skip


def tokenizer_option(value: str) -> str:
    """``--tokenizer`` (an argparse type): a folder a tokenizer was saved in."""
    folder = Path(value)
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value}: no such folder; give a folder a tokenizer was saved in "
            "(save_pretrained), or leave --tokenizer out for the embedded model's"
        )
    if not any((folder / name).is_file() for name in ("tokenizer_config.json", "tokenizer.json")):
        raise argparse.ArgumentTypeError(
            f"{value}: no tokenizer_config.json or tokenizer.json in it; give a folder a "
            "tokenizer was saved in (save_pretrained), or leave --tokenizer out"
        )
    return value


def load_tokenizer(folder: str | None) -> Any:
    from transformers import AutoTokenizer

    if folder:
        try:
            return AutoTokenizer.from_pretrained(folder)
        except (OSError, ValueError) as error:
            said = str(error).strip()
            first = said.splitlines()[0] if said else type(error).__name__
            raise Refused(f"--tokenizer {folder}: transformers cannot load it ({first})") from None
    from lm_eval_dcpmi import embedded

    args = embedded.model_args()
    return AutoTokenizer.from_pretrained(args["pretrained"], gguf_file=args["gguf_file"])
