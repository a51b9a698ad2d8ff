"""``hf-prefix``: lm-eval's ``hf`` backend, forwarding each shared token prefix once.

DC-PMI doubles the loglikelihood requests of a task: every option is scored after the
premise and again after the domain premise. ``hf`` forwards the full ``context +
continuation`` of every request, so a RACE article is forwarded once per option and
question, and a domain premise once per option of every document. ``PrefixHFLM`` lays
all requests of a call into a prefix tree (``prefix_tree``) and forwards each tree node
once, on top of its parent's key/value cache, in passes planned by ``prefix_schedule``:

1. a pass forwards a batch of nodes (right-padded rows; sibling leaves packed side by
   side under a 4D mask), after copies of their parents' cache rows (padded slots
   masked out, position ids continuing after each parent);
2. the logits at the positions some request scores go through log-softmax and score
   those tokens; a request's answer is complete when its last token is scored;
3. a pass over nodes with children keeps its cache until their subtrees are done.

The caches alive at once are bounded by a cache budget (model argument
``prefix_cache_mb``; by default what ``hf``'s largest call holds in logits, see
``prefix_schedule``); a node whose cache does not fit is forwarded again in front of
each child instead, so a small budget costs speed, never exactness.

The loglikelihoods and ``is_greedy`` flags are those of ``hf`` up to floating-point
rounding (the same logits, computed in different matrix shapes). Requests that
``hf`` would left-truncate (context + continuation longer than ``max_length + 1``
tokens), the windows of ``loglikelihood_rolling`` and seq2seq models go through
``HFLM``'s own code unchanged; so does everything when the model's cache is not a
plain ``DynamicCache`` (sliding-window or linear-attention layers, old transformers)
or when the self-check at start-up finds that cached and uncached scoring disagree.

Several processes (``accelerate launch``, one per GPU): every process runs the
self-check and the processes agree on its outcome in one collective call in
``__init__``; with ``batch_size=auto`` every process makes exactly one batch-size
detection (HFLM's, one collective) per ``_loglikelihood_tokens`` call, whatever its
requests, and hands its over-long requests to HFLM with that batch size (so HFLM
makes no collective call of its own there). No other collective calls are made.

Usage: ``lm_eval --model hf-prefix --model_args pretrained=...`` (the plugin
registers the name; every ``hf`` model argument works unchanged).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from lm_eval_dcpmi.prefix_cache import Kept, gather_cache, layer_tensors, output_cache
from lm_eval_dcpmi.prefix_schedule import (
    PACK_ROW,
    Answer,
    Answers,
    Budget,
    Pair,
    Pass,
    Release,
    Request,
    longest_input,
    over_length,
    plan,
    unique_pairs,
)
from lm_eval_dcpmi.prefix_tree import build_tree

log = logging.getLogger(__name__)

# Largest disagreement between cached and uncached logits accepted by the self-check.
_SELF_CHECK_TOLERANCE = 1e-3
Score = Callable[[int, float, bool], None]  # (pair, token log-prob, token is greedy)


@dataclasses.dataclass(frozen=True)
class Setup:
    """How the model is driven; decided once, in ``__init__``, never changed after."""

    cache_arg: str  # forward()'s keyword for a cache: "past_key_values" or "cache"
    keep_arg: str | None  # "logits_to_keep" when forward() takes it
    packed: bool  # sibling leaves share rows (4D mask), else one per row
    vocab: int  # logits per position, for memory budgets
    kv_per_token: int  # cache elements per token position (all layers, keys and values)


class PrefixHFLM(HFLM):
    """``HFLM`` whose ``_loglikelihood_tokens`` forwards each shared token prefix once."""

    def __init__(
        self,
        *args: Any,
        prefix_cache_mb: float | str | None = None,
        softmax_dtype: str | torch.dtype | None = None,
        mixed_precision_dtype: str | torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            *args,
            softmax_dtype=softmax_dtype,
            mixed_precision_dtype=mixed_precision_dtype,
            **kwargs,
        )
        # The two dtypes as HFLM documents and reads them (its __init__ arguments).
        self._softmax = _dtype(softmax_dtype)
        self._autocast = _dtype(mixed_precision_dtype)
        self._cache_mb = float(prefix_cache_mb) if prefix_cache_mb not in (None, "") else None
        # Every process gets here, in the same order: the one place for the collective
        # call that makes all processes take the self-check's decision together.
        self._setup: Setup | None = self._decide_setup() if self.backend == "causal" else None

    # ------------------------------------------------------------------ entry point
    def _loglikelihood_tokens(
        self,
        requests: list[Request],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[Answer]:
        setup = self._setup
        # loglikelihood_rolling's windows (no request strings): HFLM's path, unchanged.
        if setup is None or any(request[0] is None for request in requests):
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        batch_size = self._rows_per_call(requests, override_bs)  # before any early return
        if not requests:
            return []
        pbar = tqdm(
            total=len(requests),
            disable=(disable_tqdm or (self.rank != 0)),
            desc="Running loglikelihood requests (shared prefixes)",
        )
        truncated = over_length(requests, self.max_length)
        pairs = unique_pairs(requests, skip=truncated)

        def on_answer(index: int, answer: Answer) -> None:
            # The LM's documented way to report each answer (lm-eval's CachingLM stores it).
            self.cache_hook.add_partial("loglikelihood", requests[index][0], answer)
            pbar.update(1)

        answers = Answers(len(requests), pairs, on_answer)
        if truncated:
            # HFLM's own code (it feeds the cache hook itself). override_bs: HFLM must
            # not detect a batch size here, a collective call only some processes reach.
            subset = [requests[i] for i in truncated]
            hf_answers = super()._loglikelihood_tokens(
                subset, disable_tqdm=True, override_bs=batch_size
            )
            for i, answer in zip(truncated, hf_answers, strict=True):
                answers.put(i, answer)
            pbar.update(len(truncated))
        self._score(list(pairs), self._budget(batch_size, pairs, setup), answers.score, setup)
        pbar.close()
        return answers.in_request_order()

    def _budget(self, batch_size: int, pairs: Sequence[Pair], setup: Setup) -> Budget:
        """Calls no larger than hf's largest (batch_size rows of the longest request); the
        cache budget from ``prefix_cache_mb`` if given."""
        cache = None
        if self._cache_mb is not None:
            element = torch.empty((), dtype=self.model.dtype).element_size()
            cache = int(self._cache_mb * 2**20 / element)
        return Budget(
            tokens=min(batch_size, len(pairs)) * longest_input(pairs),
            vocab=setup.vocab,
            kv_per_token=setup.kv_per_token,
            cache=cache,
        )

    def _rows_per_call(self, requests: Sequence[Request], override_bs: int | None) -> int:
        """Batch rows per forward call: the ``batch_size`` HFLM would use.

        ``auto``: HFLM's detection with this process's longest request, once per call as
        HFLM does (a size found for short requests must not be reused for long ones).
        With several processes it gathers every process's size and takes the smallest:
        a collective call, made by every process once per call, requests or not.
        """
        if str(self.batch_size).isdigit():
            return max(1, int(self.batch_size))
        if override_bs:
            return override_bs
        probe = (
            [max(requests, key=lambda r: len(r[1]) + len(r[2]))]
            if requests
            else [(None, [0], [0])]  # nothing to score here, but the others gather
        )
        # HFLM's private detector (lm_eval/models/huggingface.py, HFLM._detect_batch_size,
        # as its _loglikelihood_tokens calls it for batch_size=auto): the only way to get
        # the size hf itself would pick.
        return max(1, int(self._detect_batch_size(probe, 0)))

    # ------------------------------------------------------------------ scoring
    def _score(self, pairs: Sequence[Pair], budget: Budget, score: Score, setup: Setup) -> None:
        """Score every token of every pair, handing each to ``score``."""
        held: dict[int, Kept] = {}
        with self._inference():
            for step in plan(build_tree(pairs), budget, PACK_ROW if setup.packed else 0):
                if isinstance(step, Release):
                    del held[step.id]
                    continue
                parent = held[step.parent] if step.parent is not None else None
                kept = self._forward(step, parent, score, setup)
                if step.keep:
                    if kept is None:  # checked by the self-check; a model could still change
                        raise RuntimeError("hf-prefix: the model returned no plain key/value cache")
                    held[step.id] = kept

    def _forward(self, step: Pass, parent: Kept | None, score: Score, setup: Setup) -> Kept | None:
        """Run one pass, score its targets, and return its cache if it is kept."""
        n_rows, width = len(step.rows), step.width
        inputs = torch.zeros((n_rows, width), dtype=torch.long)
        positions = torch.zeros((n_rows, width), dtype=torch.long)
        segment = torch.full((n_rows, width), -1, dtype=torch.long)  # -1: padding
        where: list[tuple[int, int, int, int]] = []  # (row, column, token, pair)
        for r, row in enumerate(step.rows):
            column = 0
            for j, node in enumerate(row.nodes):
                n = len(node.tokens)
                inputs[r, column : column + n] = torch.tensor(node.tokens, dtype=torch.long)
                positions[r, column : column + n] = torch.arange(node.start, node.start + n)
                segment[r, column : column + n] = j
                where.extend((r, column + off, token, pair) for off, pair, token in node.targets)
                column += n
            last = int(positions[r, column - 1])
            positions[r, column:] = last + 1 + torch.arange(width - column)
        own = segment >= 0
        kwargs: dict[str, Any] = {"use_cache": step.keep}
        if parent is not None:
            rows = [row.parent for row in step.rows]
            parent_ok = parent.valid[torch.tensor(rows, device=parent.valid.device)]
            if any(len(row.nodes) > 1 for row in step.rows):
                # A packed leaf sees its parent and its own earlier tokens, not its siblings
                # (padding slots see each other: no row without any key).
                causal = torch.ones(width, width, dtype=torch.bool).tril()
                same = (segment[:, :, None] == segment[:, None, :]) & causal
                allowed = torch.cat([parent_ok[:, None, :].expand(-1, width, -1), same], -1)
                kwargs["attention_mask"] = self._mask_4d(allowed[:, None])
            else:  # one node per row: a 2D padding mask is enough
                kwargs["attention_mask"] = torch.cat([parent_ok, torch.ones_like(own)], -1).long()
            kwargs[setup.cache_arg] = gather_cache(parent.layers, rows, self.device)
            kwargs["position_ids"] = positions
            kwargs["use_cache"] = True
        # Without a parent: right padding needs no mask (causal attention never looks
        # ahead) and the default position ids are the nodes' (they start at 0).
        columns = sorted({column for _, column, _, _ in where}) or [width - 1]
        if setup.keep_arg is not None:  # only these positions go through the LM head
            kwargs[setup.keep_arg] = torch.tensor(columns, device=self.device)
            index = {column: i for i, column in enumerate(columns)}
        else:
            index = {column: column for column in columns}
        kwargs = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in kwargs.items()}
        out = self.model(input_ids=inputs.to(self.device), **kwargs)
        if where:
            r_index = torch.tensor([r for r, _, _, _ in where], device=self.device)
            c_index = torch.tensor([index[c] for _, c, _, _ in where], device=self.device)
            tokens = torch.tensor([t for _, _, t, _ in where], device=self.device)
            logprobs = F.log_softmax(out.logits[r_index, c_index], dim=-1, dtype=self._softmax)
            values = logprobs.gather(-1, tokens[:, None])[:, 0].tolist()
            greedy = (logprobs.argmax(dim=-1) == tokens).tolist()
            del logprobs
            for (_, _, _, pair), value, is_greedy in zip(where, values, greedy, strict=True):
                score(pair, value, is_greedy)
        if not step.keep:
            return None
        layers = layer_tensors(output_cache(out))
        if layers is None:
            return None
        own = own.to(self.device)
        return Kept(
            layers, own if parent is None else torch.cat([parent_ok.to(own.device), own], -1)
        )

    def _mask_4d(self, allowed: torch.Tensor) -> torch.Tensor:
        """A custom 4D mask in the form the model's attention takes (bool for sdpa)."""
        if getattr(self.model.config, "_attn_implementation", None) == "sdpa":
            return allowed
        dtype = self.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype)
        return mask.masked_fill(~allowed, torch.finfo(dtype).min)

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """No gradients, and the autocast HFLM's ``_model_call`` uses
        (``mixed_precision_dtype``)."""
        dtype = self._autocast
        with (
            torch.no_grad(),
            torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype is not None),
        ):
            yield

    # ------------------------------------------------------------------ self-check
    def _decide_setup(self) -> Setup | None:
        """The self-check's decision, the same in every process: packed rows if every
        process's check passes them, else one leaf per row if every process's passes
        that, else None (plain hf scoring for every request)."""
        probe = self._probe()
        if isinstance(probe, Setup):
            candidates = [dataclasses.replace(probe, packed=packed) for packed in (True, False)]
            problems = [self._check_mode(candidate) for candidate in candidates]
        else:
            candidates, problems = [], [probe, probe]
        # Every process reaches this collective exactly once: the checks catch everything.
        passed = self._all_processes([problem is None for problem in problems])
        chosen = next((c for c, ok in zip(candidates, passed, strict=False) if ok), None)
        if chosen is not None and not chosen.packed:
            log.info("hf-prefix: one leaf per row (%s)", problems[0] or "another process")
        if chosen is None:
            reasons = "; ".join(sorted({p for p in problems if p is not None}))
            log.warning(
                "hf-prefix: this model cannot reuse a key/value cache (%s); "
                "using hf's scoring for every request.",
                reasons or "the check failed in another process",
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
        tokens = tuple(_check_tokens(self)[:3])
        try:
            with self._inference():
                out = self.model(
                    input_ids=torch.tensor([tokens], device=self.device), use_cache=True
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
        # sibling leaves (packed when setup.packed), rows of several lengths (padding).
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
        sums = [0.0] * len(pairs)

        def add(pair: int, value: float, _greedy: bool) -> None:
            sums[pair] += value

        try:
            budget = Budget(tokens=6, vocab=1, kv_per_token=0)  # several passes per level
            self._score(pairs, budget, add, setup)
            with self._inference():
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


def _dtype(value: str | torch.dtype | None) -> torch.dtype | None:
    """``"bfloat16"`` -> ``torch.bfloat16``, as HFLM reads its dtype arguments."""
    return getattr(torch, value) if isinstance(value, str) and value else value or None


def _check_tokens(lm: HFLM) -> list[int]:
    """Eight made-up token ids, the same in every process."""
    vocab = lm.model.get_input_embeddings().num_embeddings
    return [(7919 * i + 11) % vocab for i in range(8)]
