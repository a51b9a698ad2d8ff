"""``hf-prefix``: lm-eval's ``hf`` backend, with each shared context run through the model once.

DC-PMI doubles the loglikelihood requests of a task: every option is scored after
the premise and again after the domain premise. ``hf`` forwards the full
``context + continuation`` of every request, so a multiple-choice document with a
long premise (RACE) pays for that premise once per option. ``PrefixHFLM`` groups
the requests by their context token sequence and, for each group:

1. runs the context once (several contexts per call, right-padded), keeping the
   key/value cache and the next-token distribution at the context's last token;
2. scores one-token continuations from that distribution alone (no further pass);
3. scores longer continuations in batches on top of a copy of the cached state
   (the cache rows are gathered per continuation, padded context slots masked out,
   position ids continuing after each context).

Only one context pass's cache is alive at a time, and only until its continuations
are scored. Calls are sized against what ``hf`` itself would do with the same requests
and ``batch_size``: no call forwards more token positions than ``hf``'s largest call
(``batch_size`` rows of the longest request), and the cache, its per-row copies and
the logits a call holds stay within the memory of that call's logits and
log-probabilities. Within those bounds a call takes more rows than ``batch_size`` when
they are short (continuations without their context): every forward call has a fixed
cost. A call accepts some padding rather than one more call (``_PAD_SLACK``,
``_PAD_FREE``).

The loglikelihoods and ``is_greedy`` flags are those of ``hf`` up to floating-point
rounding (the same logits, computed in different matrix shapes). Requests that
``hf`` would left-truncate (context + continuation longer than ``max_length + 1``
tokens), the windows of ``loglikelihood_rolling`` and seq2seq models go through
``HFLM``'s own code unchanged; so does everything when the model's cache is not a
plain ``DynamicCache`` (sliding-window or linear-attention layers, old transformers)
or when a start-up self-check finds that cached and uncached scoring disagree.

Usage: ``lm_eval --model hf-prefix --model_args pretrained=...`` (the plugin
registers the name; every ``hf`` model argument works unchanged).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

log = logging.getLogger(__name__)

# (request strings or None, context tokens, continuation tokens), as HFLM receives them.
Request = tuple[Any, list[int], list[int]]
Answer = tuple[float, bool]

# Largest disagreement between cached and uncached logits accepted by the self-check.
_SELF_CHECK_TOLERANCE = 1e-3
# Padding a call may carry: this share of its token positions, or this many positions.
_PAD_SLACK = 0.1
_PAD_FREE = 32
# Tokens of one row of packed continuations (of one context). Every continuation token
# attends over the whole row (most of it masked), so rows stay short.
_PACK_ROW = 128


class PrefixHFLM(HFLM):
    """``HFLM`` whose ``_loglikelihood_tokens`` runs each distinct context once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._prefix_ok: bool | None = None  # decided on first use (self-check)
        self._auto_rows: int | None = None
        self._cache_arg = "past_key_values"
        self._keep_arg: str | None = None
        self._vocab = 1  # both set by the first context pass (the self-check)
        self._kv_per_token = 0
        self._packed = True  # several continuations per row (4D mask); self-checked

    # ------------------------------------------------------------------ entry point
    def _loglikelihood_tokens(
        self,
        requests: list[Request],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[Answer]:
        if (
            not requests
            or self.backend != "causal"
            # loglikelihood_rolling's windows (no request strings): HFLM's path, unchanged
            or any(request[0] is None for request in requests)
            or not self._prefix_supported()
        ):
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)

        batch_size = self._rows_per_call(requests, override_bs)
        results: list[Answer | None] = [None] * len(requests)
        pbar = tqdm(
            total=len(requests),
            disable=(disable_tqdm or (self.rank != 0)),
            desc="Running loglikelihood requests (shared contexts)",
        )

        # Requests HFLM left-truncates: its own code (it also feeds the cache hook).
        truncated = [
            i
            for i, (_, context, continuation) in enumerate(requests)
            if len(context) + len(continuation) > self.max_length + 1
        ]
        if truncated:
            answers = super()._loglikelihood_tokens(
                [requests[i] for i in truncated], disable_tqdm=True, override_bs=override_bs
            )
            for i, answer in zip(truncated, answers, strict=True):
                results[i] = answer
            pbar.update(len(truncated))

        # context tokens -> continuation tokens -> indices of the requests asking for it
        groups: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
        skip = set(truncated)
        for i, (_, context, continuation) in enumerate(requests):
            if i in skip:
                continue
            assert len(context) > 0, "context must hold at least one token"
            assert len(continuation) > 0, "continuation must hold at least one token"
            groups.setdefault(tuple(context), {}).setdefault(tuple(continuation), []).append(i)

        # What hf's largest call would hold: batch_size rows of the longest request.
        longest = max(
            (len(c) + len(cont) - 1 for c, conts in groups.items() for cont in conts),
            default=1,
        )
        tokens = min(batch_size, len(requests)) * longest
        budget = _Budget(
            tokens=tokens,
            vocab=self._vocab,
            kv_per_token=self._kv_per_token,
        )

        def emit(context: tuple[int, ...], continuation: tuple[int, ...], answer: Answer) -> None:
            for i in groups[context][continuation]:
                results[i] = answer
                self.cache_hook.add_partial("loglikelihood", requests[i][0], answer)
                pbar.update(1)

        self._score(groups, budget, emit)
        pbar.close()
        assert all(answer is not None for answer in results)
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------ scoring
    def _score(
        self,
        groups: Mapping[tuple[int, ...], Iterable[tuple[int, ...]]],
        budget: _Budget,
        emit: Callable[[tuple[int, ...], tuple[int, ...], Answer], None],
    ) -> None:
        """Score every (context, continuation) of ``groups``, handing each to ``emit``."""
        # Longest contexts first (as HFLM: an out-of-memory error comes at once).
        order = sorted(groups, key=lambda context: (-len(context), context))
        with self._inference():
            for contexts in budget.context_batches(order):
                last_logits, layers = self._context_pass(contexts)
                last = F.log_softmax(last_logits, dim=-1, dtype=self.softmax_dtype)  # [G, V]
                del last_logits
                held = _Held(contexts, layers, last, last.argmax(dim=-1))
                pending: dict[int, list[tuple[int, ...]]] = {}  # context row -> continuations
                for g, context in enumerate(contexts):
                    for cont in groups[context]:
                        if len(cont) == 1:  # scored by the context pass alone
                            emit(context, cont, held.first_token(g, cont))
                        else:
                            pending.setdefault(g, []).append(cont)
                rows = [
                    (g, packed)
                    for g, conts in pending.items()
                    for packed in _pack(conts, _PACK_ROW if self._packed else 0)
                ]
                # Longest rows first, so that a pass holds rows of similar lengths.
                rows.sort(key=lambda row: (-_steps(row[1]), row[0]))
                held_memory = budget.cache_memory(contexts)
                for batch in budget.continuation_batches(
                    rows,
                    [_steps(conts) for _, conts in rows],
                    [len(contexts[g]) for g, _ in rows],
                    held_memory,
                ):
                    answers = iter(self._continuation_pass(batch, held))
                    for g, conts in batch:
                        for cont in conts:
                            emit(contexts[g], cont, next(answers))
                del held, layers, last

    def _context_pass(
        self, contexts: Sequence[tuple[int, ...]]
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Logits after each context's last token [G, V], and the key/value cache per layer."""
        lengths = torch.tensor([len(c) for c in contexts], device=self.device)
        inputs = torch.zeros(
            (len(contexts), int(lengths.max())), dtype=torch.long, device=self.device
        )
        for g, context in enumerate(contexts):
            inputs[g, : len(context)] = torch.tensor(context, dtype=torch.long)
        kwargs: dict[str, Any] = {"use_cache": True}
        rows = torch.arange(len(contexts), device=self.device)
        if self._keep_arg is not None:
            # Only the positions of the contexts' last tokens go through the LM head.
            positions, column = torch.unique(lengths - 1, return_inverse=True)
            kwargs[self._keep_arg] = positions
        else:
            column = lengths - 1
        # Right padding needs no mask: causal attention never looks ahead.
        out = self.model(input_ids=inputs, **kwargs)
        last = out.logits[rows, column]
        layers = _layer_tensors(_output_cache(out))
        if layers is None:  # checked by the self-check; a model could still change
            raise RuntimeError("hf-prefix: the model returned no plain key/value cache")
        # Cache elements per token position (all layers, keys and values), for budgets.
        self._kv_per_token = sum(
            k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3] for k, v in layers
        )
        self._vocab = int(out.logits.shape[-1])
        return last, layers

    def _continuation_pass(
        self, batch: Sequence[tuple[int, Sequence[tuple[int, ...]]]], held: _Held
    ) -> list[Answer]:
        """Scores of multi-token continuations on copies of their contexts' caches.

        A row is (context row, continuations): the continuations' tokens one after the
        other, each at the positions that follow the context. With several per row, a
        4D mask lets each see only the context and its own earlier tokens.
        """
        rows = [g for g, _ in batch]
        ctx_lengths = [len(held.contexts[g]) for g in rows]
        width = max(ctx_lengths)  # cache slots kept (contexts are right-padded)
        steps = max(_steps(conts) for _, conts in batch)  # tokens forwarded per row
        inputs = torch.zeros((len(batch), steps), dtype=torch.long)
        position_ids = torch.zeros((len(batch), steps), dtype=torch.long)
        segment = torch.full((len(batch), steps), -1, dtype=torch.long)  # -1: padding
        for r, (_, conts) in enumerate(batch):
            start = 0
            for j, cont in enumerate(conts):
                n = len(cont) - 1
                inputs[r, start : start + n] = torch.tensor(cont[:-1], dtype=torch.long)
                position_ids[r, start : start + n] = ctx_lengths[r] + torch.arange(n)
                segment[r, start : start + n] = j
                start += n
            position_ids[r, start:] = ctx_lengths[r] + torch.arange(steps - start)
        lengths = torch.tensor(ctx_lengths)
        context_ok = torch.arange(width)[None, :] < lengths[:, None]  # [R, width]
        if any(len(conts) > 1 for _, conts in batch):
            # Same continuation, not later (padding slots see each other: no empty rows).
            causal = torch.ones(steps, steps, dtype=torch.bool).tril()
            own = (segment[:, :, None] == segment[:, None, :]) & causal  # [R, steps, steps]
            allowed = torch.cat([context_ok[:, None, :].expand(-1, steps, -1), own], dim=-1)
            attention_mask = self._mask_4d(allowed[:, None])
        else:  # one continuation per row: a 2D padding mask is enough
            attention_mask = torch.cat(
                [context_ok, torch.ones(len(batch), steps, dtype=torch.bool)], dim=-1
            ).long()
        cache = _gather_cache(held.layers, rows, width, self.device)
        out = self.model(
            input_ids=inputs.to(self.device),
            attention_mask=attention_mask.to(self.device),
            position_ids=position_ids.to(self.device),
            use_cache=True,
            **{self._cache_arg: cache},
        )
        del cache
        logprobs = F.log_softmax(out.logits, dim=-1, dtype=self.softmax_dtype)  # [R, steps, V]
        del out
        greedy = logprobs.argmax(dim=-1)  # [R, steps]
        answers = []
        for r, (g, conts) in enumerate(batch):
            start = 0
            for cont in conts:
                n = len(cont) - 1
                rest = torch.tensor(cont[1:], dtype=torch.long, device=self.device)
                token_logprobs = torch.cat(
                    [
                        held.last[g, cont[0]].reshape(1),
                        logprobs[r, start : start + n].gather(-1, rest[:, None])[:, 0],
                    ]
                )
                is_greedy = bool(held.greedy[g] == cont[0]) and bool(
                    (greedy[r, start : start + n] == rest).all()
                )
                answers.append((float(token_logprobs.sum()), is_greedy))
                start += n
        return answers

    def _mask_4d(self, allowed: torch.Tensor) -> torch.Tensor:
        """A custom 4D mask in the form the model's attention takes (bool for sdpa)."""
        if getattr(self.model.config, "_attn_implementation", None) == "sdpa":
            return allowed
        dtype = self.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype)
        return mask.masked_fill(~allowed, torch.finfo(dtype).min)

    # ------------------------------------------------------------------ plumbing
    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """The no-grad / autocast context HFLM's ``_model_call`` uses."""
        dtype = getattr(self, "mixed_precision_dtype", None)
        with (
            torch.no_grad(),
            torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype is not None),
        ):
            yield

    def _rows_per_call(self, requests: Sequence[Request], override_bs: int | None) -> int:
        """Batch rows per forward call: the ``batch_size`` HFLM would use."""
        if str(self.batch_size).isdigit():
            return max(1, int(self.batch_size))
        if override_bs:
            return override_bs
        if self._auto_rows is None:  # "auto": HFLM's probe with the longest request
            longest = max(requests, key=lambda r: len(r[1]) + len(r[2]))
            self._auto_rows = max(1, int(self._detect_batch_size([longest], 0)))
        return self._auto_rows

    def _prefix_supported(self) -> bool:
        """Whether cached scoring works for this model; checked once, on a tiny input."""
        if self._prefix_ok is None:
            self._prefix_ok = self._self_check()
        return self._prefix_ok

    def _self_check(self) -> bool:
        """Score made-up requests both ways: packed rows, else one continuation per row.

        Any disagreement or error in both: plain hf scoring for every request.
        """
        try:
            parameters = inspect.signature(self.model.forward).parameters
        except (TypeError, ValueError):
            parameters = {}
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self._keep_arg = "logits_to_keep" if "logits_to_keep" in parameters else None
        problems = []
        for packed in (True, False):
            self._packed = packed
            problem = self._check_once()
            if problem is None:
                if problems:
                    log.info("hf-prefix: one continuation per row (%s)", problems[0])
                return True
            problems.append(problem)
        log.warning(
            "hf-prefix: this model cannot reuse a context's key/value cache (%s); "
            "using hf's scoring for every request.",
            "; ".join(problems),
        )
        return False

    def _check_once(self) -> str | None:
        vocab = self.model.get_input_embeddings().num_embeddings
        tokens = [(7919 * i + 11) % vocab for i in range(8)]
        # Contexts of three lengths, in two context passes (one of two rows, padded),
        # continuations of 1 to 4 tokens, several per row when packed.
        groups = {
            tuple(tokens[:4]): [tuple(tokens[4:8]), tuple(tokens[5:6])],
            tuple(tokens[:1]): [tuple(tokens[1:3]), tuple(tokens[2:5]), tuple(tokens[6:8])],
            tuple(tokens[3:5]): [tuple(tokens[5:8])],
        }
        scored: dict[tuple[tuple[int, ...], tuple[int, ...]], Answer] = {}
        try:
            budget = _Budget(tokens=1 << 30, vocab=1, kv_per_token=0, context_tokens=6)
            self._score(groups, budget, lambda c, cont, answer: scored.update({(c, cont): answer}))
            with self._inference():
                for context, conts in groups.items():
                    for cont in conts:
                        full = torch.tensor([(context + cont)[:-1]], device=self.device)
                        logprobs = F.log_softmax(
                            self.model(full).logits[0, len(context) - 1 :],
                            dim=-1,
                            dtype=self.softmax_dtype,
                        )
                        want = float(
                            logprobs.gather(-1, torch.tensor(cont, device=self.device)[:, None])
                            .sum()
                            .item()
                        )
                        got = scored[(context, cont)][0]
                        if not abs(got - want) <= _SELF_CHECK_TOLERANCE:
                            return f"cached {got:.6f} vs uncached {want:.6f}"
        except Exception as err:  # any model that cannot be driven this way
            return f"{type(err).__name__}: {err}"
        return None


class _Held:
    """One context pass: its contexts, cache (per layer), log-probs and argmax at the end."""

    def __init__(
        self,
        contexts: Sequence[tuple[int, ...]],
        layers: list[tuple[torch.Tensor, torch.Tensor]],
        last: torch.Tensor,
        greedy: torch.Tensor,
    ) -> None:
        self.contexts, self.layers, self.last, self.greedy = contexts, layers, last, greedy

    def first_token(self, g: int, cont: tuple[int, ...]) -> Answer:
        return float(self.last[g, cont[0]]), bool(self.greedy[g] == cont[0])


class _Budget:
    """Sizes forward calls so that none is larger than the largest call ``hf`` would make.

    ``tokens``: token positions per call, as ``hf``'s largest call (batch_size rows x
    the longest request); ``context_tokens`` may set another bound for context passes.
    Memory, in tensor elements: ``hf``'s call holds ``tokens x vocab`` logits and as
    many log-probabilities. A context pass's cache (``kv_per_token`` elements per
    position, plus its last log-probs) may take half of that; a continuation pass adds
    its cache copies, logits and log-probabilities. Padding is accepted while it stays
    under ``_PAD_SLACK`` of a call's positions or under ``_PAD_FREE`` positions.
    """

    def __init__(
        self, tokens: int, vocab: int, kv_per_token: int, context_tokens: int | None = None
    ) -> None:
        self.tokens = max(1, tokens)
        self.context_tokens = context_tokens or self.tokens
        self.vocab = vocab
        self.kv = kv_per_token
        self.memory = 2 * self.tokens * vocab

    @staticmethod
    def _padding_ok(padded: int, real: int) -> bool:
        return padded - real <= max(_PAD_SLACK * padded, _PAD_FREE)

    def cache_memory(self, contexts: Sequence[tuple[int, ...]]) -> int:
        """Elements a context pass keeps: its (padded) cache and last log-probs."""
        return len(contexts) * (len(contexts[0]) * self.kv + self.vocab)

    def context_batches(self, contexts: Sequence[tuple[int, ...]]) -> Iterator[list]:
        """Consecutive runs of ``contexts`` (longest first) that fit one context pass."""
        batch: list[tuple[int, ...]] = []
        width = real = 0
        for context in contexts:
            if batch:
                padded = (len(batch) + 1) * width
                if (
                    padded > self.context_tokens
                    or padded * self.kv + (len(batch) + 1) * self.vocab > self.memory // 2
                    or not self._padding_ok(padded, real + len(context))
                ):
                    yield batch
                    batch = []
            if not batch:
                width, real = len(context), 0
            batch.append(context)
            real += len(context)
        if batch:
            yield batch

    def continuation_batches(
        self,
        items: Sequence[Any],
        sizes: Sequence[int],
        widths: Sequence[int],
        held_memory: int,
    ) -> Iterator[list]:
        """Consecutive runs of continuation rows (longest first) for one pass each.

        ``sizes``: the tokens each row forwards; ``widths``: its context's length.
        """
        batch: list[Any] = []
        steps = width = real = 0
        for item, size, item_width in zip(items, sizes, widths, strict=True):
            if batch:
                rows = len(batch) + 1
                wider = max(width, item_width)
                memory = held_memory + rows * ((wider + steps) * self.kv + 2 * steps * self.vocab)
                if (
                    rows * steps > self.tokens
                    or memory > self.memory
                    or not self._padding_ok(rows * steps, real + size)
                ):
                    yield batch
                    batch = []
            if not batch:
                steps, width, real = size, 0, 0
            batch.append(item)
            width = max(width, item_width)
            real += size
        if batch:
            yield batch


def _steps(conts: Sequence[tuple[int, ...]]) -> int:
    """Tokens a row of continuations forwards (each without its last token)."""
    return sum(len(cont) - 1 for cont in conts)


def _pack(conts: Sequence[tuple[int, ...]], capacity: int) -> list[list[tuple[int, ...]]]:
    """Continuations of one context in rows of at most ``capacity`` tokens (first fit,
    longest first); a longer continuation gets a row of its own. 0: one per row."""
    rows: list[list[tuple[int, ...]]] = []
    room: list[int] = []
    for cont in sorted(conts, key=lambda c: (-len(c), c)):
        n = len(cont) - 1
        for i, free in enumerate(room):
            if n <= free:
                rows[i].append(cont)
                room[i] -= n
                break
        else:
            rows.append([cont])
            room.append(max(capacity - n, 0))
    return rows


def _output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def _layer_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(keys, values) of every layer of a plain dynamic cache, else None."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    if type(cache) is not DynamicCache or not hasattr(cache, "layers"):
        return None
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None  # sliding-window, quantized, linear-attention or shared layers
    return [(layer.keys, layer.values) for layer in cache.layers]


def _gather_cache(
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
