"""What ``hf-prefix`` reads of a model's config (its kinds of attention layers, its sizes),
and the reduced copy of the model its self-check runs on (see ``_check``)."""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import torch

log = logging.getLogger("lm_eval_dcpmi.hf_prefix._lm")

# The reduced copy: these sizes where its config has them, one layer of each kind (at
# least two layers) and this sliding window. Its vocabulary is the model's.
_REDUCED_SIZES = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4}
_REDUCED_HEAD_DIM = 16
_REDUCED_VOCAB = 512
REDUCED_WINDOW = 8  # past the structure check's short requests (7 tokens), as real windows are


@dataclasses.dataclass(frozen=True)
class Reduced:
    """The reduced copy in fp32, and the same weights in the model's dtype (None when that
    is fp32)."""

    fp32: Any
    in_dtype: Any | None


def reduced_copy(model: Any, device: torch.device) -> Reduced | None:
    """The model's own class at a toy size (see the module's docstring), or None when its
    config cannot be reduced. Weights are drawn with a fixed seed (the same in every
    process) at a scale where attention is sharp: a wrong mask moves the answers by far
    more than the tolerance."""
    config = model.config
    if hasattr(config, "get_text_config") and config.get_text_config() is not config:
        return None  # a text model inside another (vision-language): checked as it is
    layout = attention_layout(config)
    if isinstance(layout, str):
        return None
    kinds, window = layout
    changes: dict[str, Any] = {
        key: value for key, value in _REDUCED_SIZES.items() if getattr(config, key, None)
    }
    if getattr(config, "head_dim", None):
        changes["head_dim"] = _REDUCED_HEAD_DIM
    heads = getattr(config, "num_attention_heads", None)
    groups = getattr(config, "num_key_value_heads", None)
    if heads and groups:  # grouped (or not) as the model's attention is
        changes["num_key_value_heads"] = 1 if groups == 1 else 4 if groups == heads else 2
    layers = list(kinds) * 2 if len(kinds) == 1 else list(kinds)
    changes["num_hidden_layers"] = len(layers)
    if getattr(config, "layer_types", None):
        changes["layer_types"] = layers
    if window is not None:
        changes["sliding_window"] = REDUCED_WINDOW
    # A small vocabulary: no special token of the model's lies in it.
    changes.update(vocab_size=_REDUCED_VOCAB, bos_token_id=None, eos_token_id=None)
    changes["pad_token_id"] = None
    try:
        reduced = type(config)(**{**config.to_dict(), **changes})
        reduced._attn_implementation = config._attn_implementation
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            small = type(model)(reduced)
            with torch.no_grad():
                for parameter in small.parameters():
                    if parameter.dim() >= 2:
                        parameter.normal_(0.0, parameter.shape[-1] ** -0.5)
        small = small.to(device=device, dtype=torch.float32).eval()
        if attention_layout(small.config) != (kinds, window and REDUCED_WINDOW):
            raise ValueError("the reduced config did not keep the model's attention layout")
    except Exception as err:  # a config or class that does not rebuild at another size
        log.info("hf-prefix: the self-check runs on the model itself (%s: %s)",
                 type(err).__name__, err)  # fmt: skip
        return None
    dtype = getattr(model, "dtype", torch.float32)
    in_dtype = None
    if dtype != torch.float32 and dtype.is_floating_point:
        in_dtype = copy.deepcopy(small).to(dtype=dtype)
    return Reduced(small, in_dtype)


def output_rows(model: Any) -> int | None:
    """Logits per position: the rows of the model's output embedding."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None and weight.dim() == 2 else None


def kv_per_token(config: Any) -> int | None:
    """Cache elements per token position by the config (keys and values of every layer:
    grouped heads times head size), or None when it lacks a size."""
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    groups = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None)
    if not head_dim and heads and getattr(config, "hidden_size", None):
        head_dim = config.hidden_size // heads
    if not (layers and groups and head_dim):
        return None
    return 2 * layers * groups * head_dim


def attention_layout(config: Any) -> tuple[tuple[str, ...], int | None] | str:
    """The kinds of the model's attention layers and its sliding window (None when no
    layer slides), from its config; or what ``hf-prefix`` cannot mask, in words."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    window = getattr(text, "sliding_window", None)
    types = getattr(text, "layer_types", None)
    if types:
        kinds = tuple(dict.fromkeys(types))
    else:  # Mistral, Phi-3: every layer slides when the config names a window
        kinds = ("sliding_attention",) if window else ("full_attention",)
    unknown = [kind for kind in kinds if kind not in ("full_attention", "sliding_attention")]
    if unknown:
        return f"its {unknown[0]!r} layers"
    if "sliding_attention" not in kinds:
        return kinds, None
    if not isinstance(window, int) or window < 1:
        return f"its sliding layers' window {window!r}"
    return kinds, window
