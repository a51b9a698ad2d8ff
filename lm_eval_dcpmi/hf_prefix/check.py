"""The self-check that decides how ``hf-prefix`` drives a model (see ``lm``).

At start-up ``PrefixHFLM`` probes the model once (its forward's keywords, its cache's
kind and size, its kinds of attention layers) and scores made-up requests both through
its prefix passes and uncached: packed rows (sibling leaves side by side, small subtrees
laid out flat) if that agrees, else one node per row, else plain ``hf`` scoring. With
several processes all take the same decision (one collective call).

Sliding-window layers (Mistral, Phi-3, Gemma 2 and 3, Qwen2 with its window on): the
passes keep every slot in a plain cache and give each kind of layer its own mask, the
sliding one limited to the window (``Setup.window_masks``); the check then also scores
requests longer than the window. If that disagrees, sequences that fit in the window
(where sliding and full attention are the same) still share prefixes, and only requests
longer than the window go through ``hf``'s scoring.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from lm_eval_dcpmi.hf_prefix.cache import empty_cache, layer_tensors, output_cache
from lm_eval_dcpmi.hf_prefix.schedule import Budget

log = logging.getLogger("lm_eval_dcpmi.hf_prefix.lm")

# Largest disagreement between cached and uncached logits accepted by the self-check.
_SELF_CHECK_TOLERANCE = 1e-3


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

    def _decide_setup(self) -> Setup | None:
        """The self-check's decision, the same in every process: packed rows if every
        process's check passes them, else one leaf per row if every process's passes
        that, else None (plain hf scoring for every request)."""
        probe = self._probe()
        if isinstance(probe, Setup):
            modes = [(True, True), (False, True)]
            if probe.window is not None:  # then sharing only what fits in the window
                modes += [(True, False), (False, False)]
            candidates = [
                dataclasses.replace(probe, packed=packed, window_masks=masks)
                for packed, masks in modes
            ]
            problems = [self._check_mode(candidate) for candidate in candidates]
        else:
            candidates, problems = [], [probe, probe]
        # Every process reaches this collective exactly once: the checks catch everything.
        passed = self._all_processes([problem is None for problem in problems])
        chosen = next((c for c, ok in zip(candidates, passed, strict=False) if ok), None)
        if chosen is not None and not chosen.packed:
            log.info("hf-prefix: one leaf per row (%s)", problems[0] or "another process")
        if chosen is not None and not chosen.window_masks:
            log.warning(
                "hf-prefix: the sliding-window masks do not score as the model does (%s); "
                "requests longer than its window (%d tokens) go through hf's scoring.",
                problems[0] or "another process",
                chosen.window,
            )
        return chosen

    def _all_processes(self, flags: list[bool]) -> list[bool]:
        """Each flag, True only where it is True in every process (one all_gather)."""
        if self.world_size <= 1:
            return flags
        local = torch.tensor(flags, dtype=torch.long, device=self.device)
        gathered = self.all_gather(local).reshape(self.world_size, len(flags))
        return [bool(v) for v in gathered.min(dim=0).values.tolist()]

    def _probe(self) -> Setup | str:
        """The forward keywords, and one kept pass: vocabulary, cache size and kind."""
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
        )
        layout = attention_layout(self.model.config)
        if isinstance(layout, str):
            return layout
        setup = dataclasses.replace(setup, kinds=layout[0], window=layout[1])
        tokens = tuple(_check_tokens(self)[:3])
        try:
            with self._inference():
                out = self.model(
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
        return dataclasses.replace(setup, vocab=int(out.logits.shape[-1]), kv_per_token=kv)

    def _check_mode(self, setup: Setup) -> str | None:
        """None when made-up requests score the same with ``setup`` as uncached."""
        t = _check_tokens(self)
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
        problem = self._agrees(pairs, Budget(tokens=6, vocab=1, kv_per_token=0), setup)
        window = setup.window
        if problem is None and window is not None and setup.window_masks:
            if window + 1 < self.max_length:  # else no request reaches past the window
                # Past the window: a shared prefix longer than it, and a continuation that
                # crosses it inside one node.
                long = _check_tokens(self, window + 8)
                head = tuple(long[: window + 2])
                pairs = [
                    (head, tuple(long[window + 2 : window + 6])),
                    (head, (long[3],)),
                    (tuple(long[:4]), tuple(long[4 : window + 6])),
                ]
                budget = Budget(tokens=window + 8, vocab=1, kv_per_token=0)
                problem = self._agrees(pairs, budget, setup)
                if problem is not None:
                    problem = f"past the window: {problem}"
        return problem

    def _agrees(
        self, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]], budget: Budget, setup: Setup
    ) -> str | None:
        """None when ``pairs`` score the same through passes under ``budget`` as uncached."""
        sums = [0.0] * len(pairs)

        def add(pair: int, value: float, _greedy: bool) -> None:
            sums[pair] += value

        try:
            self._score(pairs, budget, add, setup)
            with self._inference(packed=False):  # the reference: hf's own arithmetic
                for (context, cont), got in zip(pairs, sums, strict=True):
                    full = torch.tensor([(context + cont)[:-1]], device=self.device)
                    logprobs = F.log_softmax(
                        self.model(full).logits[0, len(context) - 1 :], dim=-1, dtype=self._softmax
                    )
                    index = torch.tensor(cont, device=self.device)[:, None]
                    want = float(logprobs.gather(-1, index).sum().item())
                    if not abs(got - want) <= _SELF_CHECK_TOLERANCE:
                        return f"cached {got:.6f} vs uncached {want:.6f}"
        except Exception as err:  # any model that cannot be driven this way
            return f"{type(err).__name__}: {err}"
        return None


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


def _check_tokens(lm: Any, count: int = 8) -> list[int]:
    """``count`` made-up token ids, the same in every process."""
    vocab = lm.model.get_input_embeddings().num_embeddings
    return [(7919 * i + 11) % vocab for i in range(count)]
