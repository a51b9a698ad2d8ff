"""``prefix_kernels=onednn``: the model's linear layers on oneDNN with prepacked weights,
while ``hf-prefix`` scores (opt-in; CPU, fp32).

On the CPU, ``torch.nn.Linear`` in fp32 calls MKL's ``sgemm``, which on the AMD cores
this project is timed on reaches 45-95 GFLOP/s per core at the embedded model's shapes;
oneDNN's matmul on a weight packed once reaches 75-107 (``benchmarks/profile_prefix.py``
measures both). Scoring is about 15% faster. It is the same fp32 arithmetic in another
summation order, and that moves log-likelihoods by up to ~1.5e-4 from ``hf``'s (about
2e-6 of their size; ``hf`` itself moves by up to ~5e-5 between batch sizes), past the
1e-4 within which the default ``hf-prefix`` (``prefix_kernels=torch``, MKL's own
kernels, bit for bit ``hf``'s per matrix) promises ``hf``'s numbers. Hence opt-in.

Only ``hf-prefix``'s own passes use the packed weights: a patched ``forward`` takes them
on a thread inside ``packed()`` and is ``F.linear`` everywhere else, so HFLM's own
scoring (over-long requests, rolling windows, the self-check's reference) stays what
``hf`` computes. Packing doubles the memory of the linear weights; it applies to fp32
models on the CPU without autocast, and is ignored (with a log line) elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger("lm_eval_dcpmi.hf_prefix._lm")

CHOICES = ("torch", "onednn")
_PACKED = "_hf_prefix_packed_weight"  # a patched module's packed weight
_on = threading.local()  # per thread, as torch's grad mode and autocast are


def pack_linears(model: torch.nn.Module) -> int:
    """Give every ``nn.Linear`` of ``model`` a packed weight and the patched ``forward``
    (once per module: several ``PrefixHFLM`` may wrap one model). The count patched."""
    count = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            if not hasattr(module, _PACKED):
                _patch(module)
            count += 1
    return count


def _patch(module: torch.nn.Linear) -> None:
    packed = torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), None)
    setattr(module, _PACKED, packed)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if getattr(_on, "packed", False) and x.dtype == torch.float32:
            return torch.ops.mkldnn._linear_pointwise(x, packed, module.bias, "none", [], "")
        return F.linear(x, module.weight, module.bias)

    module.forward = forward  # an instance attribute: nn.Module.__call__ (and hooks) use it


@contextlib.contextmanager
def packed() -> Iterator[None]:
    """The packed weights for the linear layers called on this thread."""
    before = getattr(_on, "packed", False)
    _on.packed = True
    try:
        yield
    finally:
        _on.packed = before


def use_packed(
    model: Any, device: torch.device, choice: str | None, autocast: torch.dtype | None
) -> bool:
    """Pack ``model``'s linear weights if ``prefix_kernels=onednn`` and that applies (CPU,
    fp32 weights, no autocast, oneDNN built in); whether they are packed."""
    choice = choice or "torch"
    if choice not in CHOICES:
        raise ValueError(
            f"hf-prefix: prefix_kernels={choice!r} is not one of {', '.join(CHOICES)}; "
            "set prefix_kernels=torch (the default: hf's numbers within 1e-4) or "
            "prefix_kernels=onednn (about 15% faster on the CPU, within ~2e-4)."
        )
    if choice == "torch":
        return False
    weights = [m.weight for m in model.modules() if type(m) is torch.nn.Linear]
    why = (
        "the model is not on the CPU" if device.type != "cpu"
        else "mixed_precision_dtype (autocast) is set" if autocast is not None
        else "this torch has no oneDNN" if not torch.backends.mkldnn.is_available()
        else "the model has no nn.Linear layers" if not weights
        else "the linear weights are not fp32 on the CPU"
        if any(w.dtype != torch.float32 or w.device.type != "cpu" for w in weights)
        else None
    )  # fmt: skip
    if why is not None:
        log.warning("hf-prefix: prefix_kernels=onednn ignored: %s; torch's kernels used", why)
        return False
    try:
        pack_linears(model)
    except RuntimeError as err:  # a torch build whose oneDNN cannot pack these weights
        log.warning("hf-prefix: prefix_kernels=onednn ignored: oneDNN cannot pack (%s)", err)
        return False
    return True
