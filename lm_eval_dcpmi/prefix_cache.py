"""The key/value cache tensors ``hf-prefix`` keeps and copies (see ``prefix_lm``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lm_eval_dcpmi.prefix_schedule import Answer, Tokens


class Held:
    """One context pass: its contexts, cache (per layer), log-probs and argmax at the end."""

    def __init__(
        self,
        contexts: Sequence[Tokens],
        layers: list[tuple[torch.Tensor, torch.Tensor]],
        last: torch.Tensor,
        greedy: torch.Tensor,
    ) -> None:
        self.contexts, self.layers, self.last, self.greedy = contexts, layers, last, greedy

    def first_token(self, g: int, cont: Tokens) -> Answer:
        return float(self.last[g, cont[0]]), bool(self.greedy[g] == cont[0])


def output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def layer_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(keys, values) of every layer of a plain dynamic cache, else None."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    if type(cache) is not DynamicCache or not hasattr(cache, "layers"):
        return None
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None  # sliding-window, quantized, linear-attention or shared layers
    return [(layer.keys, layer.values) for layer in cache.layers]


def gather_cache(
    layers: Sequence[tuple[torch.Tensor, torch.Tensor]],
    rows: Sequence[int],
    width: int,
    device: torch.device,
) -> Any:
    """A fresh cache whose row r is context ``rows[r]``'s first ``width`` slots."""
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    if len(set(rows)) == 1:  # one context: a broadcast view, copied once by the cache
        g = rows[0]
        for i, (keys, values) in enumerate(layers):
            cache.update(
                keys[g : g + 1, :, :width].expand(len(rows), -1, -1, -1),
                values[g : g + 1, :, :width].expand(len(rows), -1, -1, -1),
                i,
            )
        return cache
    index = torch.tensor(rows, dtype=torch.long, device=device)
    for i, (keys, values) in enumerate(layers):
        cache.update(
            keys[:, :, :width].index_select(0, index),
            values[:, :, :width].index_select(0, index),
            i,
        )
    return cache
