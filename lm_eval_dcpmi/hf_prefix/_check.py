"""The self-check that decides how ``hf-prefix`` drives a model (see ``_lm``).

At start-up ``PrefixHFLM`` reads the model's forward keywords and its kinds of attention
layers, then tries its setups in order: packed rows (sibling leaves side by side, small
subtrees laid out flat), else one node per row; on a sliding-window model first with the
window in the masks, then sharing only what fits in the window. It takes the first setup
that passes in every process (one collective call per setup tried), else plain ``hf``
scoring for every request.

A setup passes when made-up requests score the same through its passes as uncached
(``hf``'s arithmetic). The check runs on a **reduced copy** of the model (``reduced_copy``):
the model's own class, config and attention code at a toy size (one layer of each kind,
width 64, an 8-token window, a 512-token vocabulary, weights scaled so that every token's
context moves its logits). Its cost does not grow with the model's depth, width, window
or vocabulary: no pass of the model itself, whose first forward (paging in the weights)
is then scoring's, as in ``hf``. The copy answers in two steps:

1. **The structure, in fp32, within 1e-3**: shared prefixes three levels deep, a node
   split midway, packed rows of several lengths and, on a sliding-window model, a shared
   prefix longer than the window and a continuation that crosses it.
2. **The numbers, in the model's dtype** when that is not fp32: three requests on one
   shared prefix (a kept pass, then its children), within ``tolerance``: two roundings
   of each token's log-probability, as ``hf``'s own log-softmax rounds in bf16.

The sizes the memory budgets need (logits and cache elements per position) come from the
config where the copy's own cache confirms the formula (``kv_per_token``). A model whose
config does not rebuild at a toy size (a vision-language model's text part, a config
without the usual size names) gets the structure check on itself, at its own size.

Sliding-window layers (Mistral, Phi-3, Gemma 2 and 3, Qwen2 with its window on): the
passes keep every slot in a plain cache and give each kind of layer its own mask, the
sliding one limited to the window (``Setup.window_masks``). If that disagrees, sequences
that fit in the window (where sliding and full attention are the same) still share
prefixes, and only requests longer than the window go through ``hf``'s scoring.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from lm_eval_dcpmi.hf_prefix import _kernels as kernels
from lm_eval_dcpmi.hf_prefix._cache import empty_cache, layer_tensors, output_cache
from lm_eval_dcpmi.hf_prefix._reduced import (
    REDUCED_WINDOW,
    Reduced,
    attention_layout,
    kv_per_token,
    output_rows,
    reduced_copy,
)
from lm_eval_dcpmi.hf_prefix._schedule import Budget

log = logging.getLogger("lm_eval_dcpmi.hf_prefix._lm")

# Largest disagreement between cached and uncached log-likelihoods the self-check accepts
# in fp32 (the structure check: always fp32); see ``tolerance`` for 16-bit dtypes.
_SELF_CHECK_TOLERANCE = 1e-3
Pairs = list[tuple[tuple[int, ...], tuple[int, ...]]]


@dataclasses.dataclass(frozen=True)
class Setup:
    """How the model is driven; decided once, in ``__init__``, never changed after."""

    cache_arg: str  # forward()'s keyword for a cache: "past_key_values" or "cache"
    keep_arg: str | None  # "logits_to_keep" when forward() takes it
    packed: bool  # sibling leaves and small subtrees share rows (4D mask), else one per row
    vocab: int  # logits per position, for memory budgets
    kv_per_token: int  # cache elements per token position (all layers, keys and values)
    # The model's kinds of attention layers, as its config names them ("full_attention",
    # "sliding_attention"): one mask each (a dict of them when there are several).
    kinds: tuple[str, ...] = ("full_attention",)
    window: int | None = None  # the sliding window in tokens; None when no layer slides
    # True: the sliding mask holds the window, exact at any length. False: only requests
    # that fit in the window share prefixes (the rest go through hf's scoring).
    window_masks: bool = True


class SelfCheck:
    """The self-check, as methods of ``PrefixHFLM`` (an ``HFLM``): it uses the model, the
    device, the process group and the prefix scoring (``_score``)."""

    model: Any
    device: torch.device
    world_size: int
    max_length: int
    all_gather: Callable[[torch.Tensor], torch.Tensor]
    _softmax: torch.dtype | None
    _score: Callable[..., None]
    _inference: Callable[..., Any]
    hf_sum: Callable[[list[float]], float]

    def _decide_setup(self) -> Setup | None:
        """The first setup that passes in every process, or None (plain hf scoring). The
        setups come from the config, so every process tries the same ones in the same
        order and makes one collective call per setup tried."""
        layout = attention_layout(self.model.config)
        if isinstance(layout, str):  # the same in every process: no collective call
            log.info("hf-prefix: hf's scoring for every request (%s)", layout)
            return None
        reduced = reduced_copy(self.model, self.device)
        if reduced is not None and getattr(self, "_packed", False):
            kernels.pack_linears(reduced.fp32)  # prefix_kernels=onednn: checked too
        probe = self._probe(layout, reduced)
        modes = [(True, True), (False, True)]
        if layout[1] is not None:  # then sharing only what fits in the window
            modes += [(True, False), (False, False)]
        problems: list[str] = []
        for packed, window_masks in modes:
            if isinstance(probe, Setup):
                setup = dataclasses.replace(probe, packed=packed, window_masks=window_masks)
                problem = self._check_setup(setup, reduced)
            else:
                setup, problem = None, probe
            problems.append(problem or "")
            # Every process reaches this collective once per setup: the checks catch all.
            if self._all_processes([problem is None])[0] and setup is not None:
                break
        else:
            log.warning("hf-prefix: hf's scoring for every request: %s", problems[0])
            return None
        why = problems[0] or "another process"
        if not setup.packed:
            log.info("hf-prefix: one leaf per row (%s)", why)
        if not setup.window_masks:
            log.warning(
                "hf-prefix: the sliding-window masks do not score as the model does (%s); "
                "requests longer than its window (%d tokens) go through hf's scoring.",
                why,
                setup.window,
            )
        return setup

    def _all_processes(self, flags: list[bool]) -> list[bool]:
        """Each flag, True only where it is True in every process (one all_gather)."""
        if self.world_size <= 1:
            return flags
        local = torch.tensor(flags, dtype=torch.long, device=self.device)
        gathered = self.all_gather(local).reshape(self.world_size, len(flags))
        return [bool(v) for v in gathered.min(dim=0).values.tolist()]

    def _probe(
        self, layout: tuple[tuple[str, ...], int | None], reduced: Reduced | None
    ) -> Setup | str:
        """The forward's keywords and the sizes the budgets need: logits and cache
        elements per position. Read from the config where the reduced copy's own pass
        confirms the formula (no pass of the model itself), else from one kept pass of
        the model; or what keeps the model from being driven this way, in words."""
        try:
            parameters = inspect.signature(self.model.forward).parameters
        except (TypeError, ValueError):
            parameters = {}
        setup = Setup(
            cache_arg="cache" if "cache" in parameters else "past_key_values",
            keep_arg="logits_to_keep" if "logits_to_keep" in parameters else None,
            packed=True,
            vocab=1,
            kv_per_token=0,
            kinds=layout[0],
            window=layout[1],
        )
        if reduced is not None:
            measured = self._kept_pass(reduced.fp32, setup)
            sizes = (output_rows(self.model), kv_per_token(self.model.config))
            if not isinstance(measured, str) and measured[1] == kv_per_token(reduced.fp32.config):
                if sizes[0] and sizes[1]:
                    return dataclasses.replace(setup, vocab=sizes[0], kv_per_token=sizes[1])
        measured = self._kept_pass(self.model, setup)
        if isinstance(measured, str):
            return measured
        return dataclasses.replace(setup, vocab=measured[0], kv_per_token=measured[1])

    def _kept_pass(self, model: Any, setup: Setup) -> tuple[int, int] | str:
        """One kept pass of three tokens: logits and cache elements per position, or why
        the model cannot be driven with a plain cache."""
        tokens = tuple(check_tokens(model, 3))
        try:
            with self._inference():
                out = model(
                    input_ids=torch.tensor([tokens], device=self.device),
                    use_cache=True,
                    **{setup.cache_arg: empty_cache()},
                )
        except Exception as err:  # any model that cannot be driven this way
            return f"{type(err).__name__}: {err}"
        layers = layer_tensors(output_cache(out))
        if layers is None:
            return "its cache is not a plain DynamicCache"
        kv = sum(k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3] for k, v in layers)
        return int(out.logits.shape[-1]), kv

    def _check_setup(self, setup: Setup, reduced: Reduced | None) -> str | None:
        """None when ``setup`` passes: the structure on the reduced copy in fp32, then its
        numbers in the model's dtype (without a reduced copy: on the model itself)."""
        if reduced is None:
            return self._check_structure(self.model, setup)
        window = REDUCED_WINDOW if setup.window is not None else None
        small = dataclasses.replace(setup, window=window)
        problem = self._check_structure(reduced.fp32, small)
        if problem is None and reduced.in_dtype is not None:
            problem = self._check_numbers(reduced.in_dtype, small)
            if problem is not None:
                problem = f"in {reduced.in_dtype.dtype}: {problem}"
        if problem is not None:
            return f"on a reduced copy of the model: {problem}"
        return None

    def _check_structure(self, model: Any, setup: Setup) -> str | None:
        """None when made-up requests score the same with ``setup`` as uncached."""
        t = check_tokens(model, 8)
        # Shared prefixes three levels deep, a node split midway, one-token continuations,
        # sibling leaves and a two-level subtree in one row (when setup.packed; the 6-token
        # budget below lets subtrees of up to 6 tokens lie flat), rows of several lengths.
        pairs = [
            ((t[0], t[1], t[2], t[3]), (t[4], t[5], t[6], t[7])),
            ((t[0], t[1], t[2], t[3]), (t[5],)),
            ((t[0], t[1], t[2]), (t[3], t[6], t[7])),
            ((t[0],), (t[1], t[2])),
            ((t[0],), (t[2], t[3], t[4])),
            ((t[0],), (t[6], t[7])),
            ((t[3], t[4]), (t[5], t[6], t[7])),
            ((t[3], t[4], t[5]), (t[6],)),
        ]
        problem = self._agrees(model, pairs, Budget(tokens=6, vocab=1, kv_per_token=0), setup)
        window = setup.window
        if problem is None and window is not None and setup.window_masks:
            if window + 1 < self.max_length:  # else no request reaches past the window
                # Past the window: a shared prefix longer than it, and a continuation that
                # crosses it inside one node.
                long = check_tokens(model, window + 8)
                head = tuple(long[: window + 2])
                pairs = [
                    (head, tuple(long[window + 2 : window + 6])),
                    (head, (long[3],)),
                    (tuple(long[:4]), tuple(long[4 : window + 6])),
                ]
                budget = Budget(tokens=window + 8, vocab=1, kv_per_token=0)
                problem = self._agrees(model, pairs, budget, setup)
                if problem is not None:
                    problem = f"past the window: {problem}"
        return problem

    def _check_numbers(self, model: Any, setup: Setup) -> str | None:
        """None when three requests on one shared prefix score the same through a kept
        pass and its children as uncached, in ``model``'s dtype."""
        a, b, c, d, e, f, g = check_tokens(model, 7)
        pairs = [((a, b, c), (d, e)), ((a, b, c), (f,)), ((a, b, c), (g, d))]
        # 4 tokens a call: the prefix's pass (kept), then the three in one pass after it.
        return self._agrees(model, pairs, Budget(tokens=4, vocab=1, kv_per_token=0), setup)

    def _agrees(self, model: Any, pairs: Pairs, budget: Budget, setup: Setup) -> str | None:
        """None when ``pairs`` score the same through passes under ``budget`` as uncached
        (within ``tolerance`` for the model's dtype)."""
        values: list[list[float]] = [[] for _ in pairs]

        def add(pair: int, value: float, _greedy: bool) -> None:
            values[pair].append(value)

        try:
            self._score(pairs, budget, add, setup, model)
            sums = [self.hf_sum(tokens) for tokens in values]
            want = self._uncached(model, pairs)
        except Exception as err:  # any model that cannot be driven this way
            return f"{type(err).__name__}: {err}"
        for got, expected in zip(sums, want, strict=True):
            limit = tolerance(model.dtype, expected)
            if not abs(got - expected) <= limit:
                return f"cached {got:.6f} vs uncached {expected:.6f} (tolerance {limit:g})"
        return None

    def _uncached(self, model: Any, pairs: Pairs) -> list[float]:
        """Each pair's log-likelihood as ``hf`` computes it: one batch, the inputs padded
        on the right, log-softmax over the whole vocabulary."""
        inputs = [list(context + cont)[:-1] for context, cont in pairs]
        width = max(map(len, inputs))
        batch = torch.tensor([row + [0] * (width - len(row)) for row in inputs])
        with self._inference(packed=False):  # hf's own arithmetic
            logits = model(batch.to(self.device)).logits
            values = []
            for row, (context, cont) in enumerate(pairs):
                scored = logits[row, len(context) - 1 : len(context) - 1 + len(cont)]
                logprobs = F.log_softmax(scored, dim=-1, dtype=self._softmax)
                index = torch.tensor(cont, device=self.device)[:, None]
                values.append(float(logprobs.gather(-1, index)[:, 0][None].sum()))  # [1, seq]
        return values


def tolerance(dtype: torch.dtype, value: float) -> float:
    """How far a cached log-likelihood may lie from the uncached ``value`` when the model
    computes in ``dtype``: 1e-3 in fp32 (and wider); in a 16-bit dtype also two roundings of
    each token's log-probability (2 eps |value|): the log-softmax itself rounds there, in
    ``hf`` as in the passes (bf16 rounds -13.5 to a multiple of 1/16)."""
    if not dtype.is_floating_point or torch.finfo(dtype).bits >= 32:
        return _SELF_CHECK_TOLERANCE
    return max(_SELF_CHECK_TOLERANCE, 2 * torch.finfo(dtype).eps * abs(value))


def check_tokens(model: Any, count: int) -> list[int]:
    """``count`` made-up token ids within the model's vocabulary, the same in every process."""
    vocab = model.get_input_embeddings().num_embeddings
    return [(7919 * i + 11) % vocab for i in range(count)]
