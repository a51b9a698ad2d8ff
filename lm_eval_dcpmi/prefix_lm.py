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
are scored. Which calls hold what is planned by ``prefix_schedule`` (pure, no torch).

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from lm_eval_dcpmi.prefix_cache import Held, gather_cache, layer_tensors, output_cache
from lm_eval_dcpmi.prefix_schedule import (
    PACK_ROW,
    Answer,
    Answers,
    Budget,
    Emit,
    Request,
    Row,
    Tokens,
    group_requests,
    longest_input,
    over_length,
    plan,
    steps,
)

log = logging.getLogger(__name__)

# Largest disagreement between cached and uncached logits accepted by the self-check.
_SELF_CHECK_TOLERANCE = 1e-3


@dataclasses.dataclass(frozen=True)
class Setup:
    """How the model is driven; decided once, in ``__init__``, never changed after."""

    cache_arg: str  # forward()'s keyword for a cache: "past_key_values" or "cache"
    keep_arg: str | None  # "logits_to_keep" when forward() takes it
    packed: bool  # several continuations per row (4D mask), else one per row
    vocab: int  # logits per position, for memory budgets
    kv_per_token: int  # cache elements per token position (all layers, keys and values)


class PrefixHFLM(HFLM):
    """``HFLM`` whose ``_loglikelihood_tokens`` runs each distinct context once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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
            desc="Running loglikelihood requests (shared contexts)",
        )
        truncated = over_length(requests, self.max_length)
        groups = group_requests(requests, skip=truncated)

        def on_answer(index: int, answer: Answer) -> None:
            self.cache_hook.add_partial("loglikelihood", requests[index][0], answer)
            pbar.update(1)

        answers = Answers(len(requests), groups, on_answer)
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
        # What hf's largest call would hold: batch_size rows of the longest request.
        budget = Budget(
            tokens=min(batch_size, len(requests)) * longest_input(groups),
            vocab=setup.vocab,
            kv_per_token=setup.kv_per_token,
        )
        self._score(groups, budget, answers.emit, setup)
        pbar.close()
        return answers.in_request_order()

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
        return max(1, int(self._detect_batch_size(probe, 0)))

    # ------------------------------------------------------------------ scoring
    def _score(
        self,
        groups: Mapping[Tokens, Iterable[Tokens]],
        budget: Budget,
        emit: Emit,
        setup: Setup,
    ) -> None:
        """Score every (context, continuation) of ``groups``, handing each to ``emit``."""
        with self._inference():
            for step in plan(groups, budget, PACK_ROW if setup.packed else 0):
                contexts = step.contexts
                last_logits, layers = self._context_pass(contexts, setup)
                if layers is None:  # checked by the self-check; a model could still change
                    raise RuntimeError("hf-prefix: the model returned no plain key/value cache")
                last = F.log_softmax(last_logits, dim=-1, dtype=self.softmax_dtype)  # [G, V]
                del last_logits
                held = Held(contexts, layers, last, last.argmax(dim=-1))
                for g, cont in step.one_token:
                    emit(contexts[g], cont, held.first_token(g, cont))
                for batch in step.continuation_batches:
                    scored = iter(self._continuation_pass(batch, held, setup))
                    for g, conts in batch:
                        for cont in conts:
                            emit(contexts[g], cont, next(scored))
                del held, layers, last

    def _context_pass(
        self, contexts: Sequence[Tokens], setup: Setup
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """Logits after each context's last token [G, V], and the key/value cache per
        layer (None when the model's cache is not a plain DynamicCache)."""
        lengths = torch.tensor([len(c) for c in contexts], device=self.device)
        inputs = torch.zeros(
            (len(contexts), int(lengths.max())), dtype=torch.long, device=self.device
        )
        for g, context in enumerate(contexts):
            inputs[g, : len(context)] = torch.tensor(context, dtype=torch.long)
        kwargs: dict[str, Any] = {"use_cache": True}
        rows = torch.arange(len(contexts), device=self.device)
        if setup.keep_arg is not None:
            # Only the positions of the contexts' last tokens go through the LM head.
            positions, column = torch.unique(lengths - 1, return_inverse=True)
            kwargs[setup.keep_arg] = positions
        else:
            column = lengths - 1
        # Right padding needs no mask: causal attention never looks ahead.
        out = self.model(input_ids=inputs, **kwargs)
        return out.logits[rows, column], layer_tensors(output_cache(out))

    def _continuation_pass(self, batch: Sequence[Row], held: Held, setup: Setup) -> list[Answer]:
        """Scores of multi-token continuations on copies of their contexts' caches.

        A row is (context row, continuations): the continuations' tokens one after the
        other, each at the positions that follow the context. With several per row, a
        4D mask lets each see only the context and its own earlier tokens.
        """
        rows = [g for g, _ in batch]
        ctx_lengths = [len(held.contexts[g]) for g in rows]
        width = max(ctx_lengths)  # cache slots kept (contexts are right-padded)
        n_steps = max(steps(conts) for _, conts in batch)  # tokens forwarded per row
        inputs = torch.zeros((len(batch), n_steps), dtype=torch.long)
        position_ids = torch.zeros((len(batch), n_steps), dtype=torch.long)
        segment = torch.full((len(batch), n_steps), -1, dtype=torch.long)  # -1: padding
        for r, (_, conts) in enumerate(batch):
            start = 0
            for j, cont in enumerate(conts):
                n = len(cont) - 1
                inputs[r, start : start + n] = torch.tensor(cont[:-1], dtype=torch.long)
                position_ids[r, start : start + n] = ctx_lengths[r] + torch.arange(n)
                segment[r, start : start + n] = j
                start += n
            position_ids[r, start:] = ctx_lengths[r] + torch.arange(n_steps - start)
        lengths = torch.tensor(ctx_lengths)
        context_ok = torch.arange(width)[None, :] < lengths[:, None]  # [R, width]
        if any(len(conts) > 1 for _, conts in batch):
            # Same continuation, not later (padding slots see each other: no empty rows).
            causal = torch.ones(n_steps, n_steps, dtype=torch.bool).tril()
            own = (segment[:, :, None] == segment[:, None, :]) & causal  # [R, steps, steps]
            allowed = torch.cat([context_ok[:, None, :].expand(-1, n_steps, -1), own], dim=-1)
            attention_mask = self._mask_4d(allowed[:, None])
        else:  # one continuation per row: a 2D padding mask is enough
            attention_mask = torch.cat(
                [context_ok, torch.ones(len(batch), n_steps, dtype=torch.bool)], dim=-1
            ).long()
        cache = gather_cache(held.layers, rows, width, self.device)
        out = self.model(
            input_ids=inputs.to(self.device),
            attention_mask=attention_mask.to(self.device),
            position_ids=position_ids.to(self.device),
            use_cache=True,
            **{setup.cache_arg: cache},
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

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        """The no-grad / autocast context HFLM's ``_model_call`` uses."""
        dtype = getattr(self, "mixed_precision_dtype", None)
        with (
            torch.no_grad(),
            torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype is not None),
        ):
            yield

    # ------------------------------------------------------------------ self-check
    def _decide_setup(self) -> Setup | None:
        """The self-check's decision, the same in every process: packed rows if every
        process's check passes them, else one continuation per row if every process's
        passes that, else None (plain hf scoring for every request)."""
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
            log.info("hf-prefix: one continuation per row (%s)", problems[0] or "another process")
        if chosen is None:
            reasons = "; ".join(sorted({p for p in problems if p is not None}))
            log.warning(
                "hf-prefix: this model cannot reuse a context's key/value cache (%s); "
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
        """The forward keywords, and one context pass: vocabulary, cache size and kind."""
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
        try:
            with self._inference():
                last, layers = self._context_pass([tuple(_check_tokens(self)[:3])], setup)
        except Exception as err:  # any model that cannot be driven this way
            return f"{type(err).__name__}: {err}"
        if layers is None:
            return "its cache is not a plain DynamicCache"
        kv = sum(k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3] for k, v in layers)
        return dataclasses.replace(setup, vocab=int(last.shape[-1]), kv_per_token=kv)

    def _check_mode(self, setup: Setup) -> str | None:
        """None when made-up requests score the same with ``setup`` as uncached."""
        tokens = _check_tokens(self)
        # Contexts of three lengths, in two context passes (one of two rows, padded),
        # continuations of 1 to 4 tokens, several per row when packed.
        groups = {
            tuple(tokens[:4]): [tuple(tokens[4:8]), tuple(tokens[5:6])],
            tuple(tokens[:1]): [tuple(tokens[1:3]), tuple(tokens[2:5]), tuple(tokens[6:8])],
            tuple(tokens[3:5]): [tuple(tokens[5:8])],
        }
        scored: dict[tuple[Tokens, Tokens], Answer] = {}
        try:
            budget = Budget(tokens=1 << 30, vocab=1, kv_per_token=0, context_tokens=6)
            self._score(
                groups, budget, lambda c, cont, answer: scored.update({(c, cont): answer}), setup
            )
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


def _check_tokens(lm: HFLM) -> list[int]:
    """Eight made-up token ids, the same in every process."""
    vocab = lm.model.get_input_embeddings().num_embeddings
    return [(7919 * i + 11) % vocab for i in range(8)]
