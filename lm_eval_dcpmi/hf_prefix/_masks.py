"""The attention masks of ``hf-prefix``'s passes: which earlier slot each token sees
(``sees``: its own node and the node's ancestors in the row), and that mask in the form each
kind of layer takes (``layer_masks``: sliding layers limited to their window)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lm_eval_dcpmi.hf_prefix._check import Setup


def sees(rows: Sequence[Any], segment: torch.Tensor) -> torch.Tensor:
    """[rows, q, k]: key k's node is query q's node or an ancestor of it in the row
    (``segment``: each slot's node index in its row, -1 for padding, which sees padding)."""
    nodes = max(len(row.nodes) for row in rows)
    sees = torch.zeros((len(rows), nodes + 1, nodes + 1), dtype=torch.bool)
    sees[:, 0, 0] = True  # index 0: padding
    for r, row in enumerate(rows):
        links = row.in_row_parents()
        for j in range(len(links)):
            ancestor = j
            while ancestor >= 0:
                sees[r, j + 1, ancestor + 1] = True
                ancestor = links[ancestor]
    slot = segment + 1
    return sees[torch.arange(len(rows))[:, None, None], slot[:, :, None], slot[:, None, :]]


def layer_masks(
    model: Any,
    device: torch.device,
    allowed: torch.Tensor,
    positions: torch.Tensor,
    key_positions: torch.Tensor,
    setup: Setup,
) -> torch.Tensor | dict[str, torch.Tensor]:
    """The attention mask of each kind of layer, from ``allowed`` [rows, q, k]: sliding
    layers see only keys less than the window behind the query (transformers'
    ``sliding_window_overlay``, on the tokens' positions). One kind: its mask; several
    (Gemma 2 and 3, Qwen2 with some layers sliding): a dict by kind, which their
    forward takes in place of making its own."""
    masks = {}
    for kind in setup.kinds:
        seen = allowed
        if kind == "sliding_attention" and setup.window_masks and setup.window is not None:
            distance = positions[:, :, None] - key_positions[:, None, :]
            seen = allowed & (distance < setup.window)
        masks[kind] = mask_4d(model, seen[:, None]).to(device)
    return masks[setup.kinds[0]] if len(masks) == 1 else masks


def mask_4d(model: Any, allowed: torch.Tensor) -> torch.Tensor:
    """A custom 4D mask in the form the model's attention takes (bool for sdpa)."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        return allowed
    dtype = model.dtype
    mask = torch.zeros(allowed.shape, dtype=dtype)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)
