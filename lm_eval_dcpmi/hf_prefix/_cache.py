"""The key/value cache tensors ``hf-prefix`` keeps and copies (see ``_lm``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class Kept:
    """A kept pass's cache: keys and values per layer [rows, heads, slots, dim], which
    slots hold a token (the others are padding, masked out for the rows' children) and
    each slot's position in its sequence (for sliding-window masks)."""

    layers: Layers
    valid: torch.Tensor  # [rows, slots] bool
    positions: torch.Tensor  # [rows, slots] long


def output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def empty_cache() -> Any:
    """A cache of plain layers that keep every slot. A model builds its own from its
    config, which for sliding-window layers drops the slots that fall out of the window;
    ``hf-prefix`` keeps them, and its masks say which slots each token sees."""
    from transformers.cache_utils import DynamicCache

    return DynamicCache()


def layer_tensors(cache: Any) -> Layers | None:
    """(keys, values) of every layer of a plain dynamic cache, else None."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    if type(cache) is not DynamicCache or not hasattr(cache, "layers"):
        return None
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None  # sliding-window, quantized, linear-attention or shared layers
    return [(layer.keys, layer.values) for layer in cache.layers]


def gather_cache(layers: Layers, rows: Sequence[int], device: torch.device) -> Any:
    """A fresh cache whose row r is row ``rows[r]`` of ``layers``."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    if len(set(rows)) == 1:  # one parent row: a broadcast view, copied once by the cache
        g = rows[0]
        for i, (keys, values) in enumerate(layers):
            cache.update(
                keys[g : g + 1].expand(len(rows), -1, -1, -1),
                values[g : g + 1].expand(len(rows), -1, -1, -1),
                i,
            )
        return cache
    index = torch.tensor(rows, dtype=torch.long, device=device)
    for i, (keys, values) in enumerate(layers):
        cache.update(keys.index_select(0, index), values.index_select(0, index), i)
    return cache
