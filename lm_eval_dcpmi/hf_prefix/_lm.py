"""``hf-prefix``: lm-eval's ``hf`` backend, forwarding each shared token prefix once.

DC-PMI doubles the loglikelihood requests of a task: every option is scored after the
premise and again after the domain premise. ``hf`` forwards the full ``context +
continuation`` of every request, so a RACE article is forwarded once per option and
question, and a domain premise once per option of every document. ``PrefixHFLM`` lays
all requests of a call into a prefix tree (``_tree``) and forwards each tree node
once, on top of its parent's key/value cache, in passes planned by ``_schedule``:

1. a pass forwards a batch of nodes (right-padded rows; sibling leaves packed side by
   side under a 4D mask), after copies of their parents' cache rows (padded slots
   masked out, position ids continuing after each parent);
2. the logits at the positions some request scores go through log-softmax and score
   those tokens; a request's answer is complete when its last token is scored;
3. a pass over nodes with children keeps its cache until their subtrees are done.

The caches alive at once are bounded by a cache budget (model argument
``prefix_cache_mb``; by default half of what ``hf``'s largest call holds, so that the
peak stays within 1.5 times ``hf``'s, see ``_schedule``); a node whose cache does not
fit is forwarded again in front of each child instead, so a small budget costs speed,
never exactness.

The loglikelihoods and ``is_greedy`` flags are those of ``hf`` up to floating-point
rounding (the same logits, computed in different matrix shapes). Requests that
``hf`` would left-truncate (context + continuation longer than ``max_length + 1``
tokens), the windows of ``loglikelihood_rolling`` and seq2seq models go through
``HFLM``'s own code unchanged; so does everything when the model cannot be driven with a
plain ``DynamicCache`` (linear-attention or chunked layers, old transformers) or when the
self-check at start-up finds that cached and uncached scoring disagree. Sliding-window
layers get a mask of their own, limited to the window (``_check``); should that fail
the check, only the requests longer than the window go through ``HFLM``'s code.

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
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi._harness import HookedHFLM
from lm_eval_dcpmi.hf_prefix import _kernels as kernels
from lm_eval_dcpmi.hf_prefix import _masks as masks
from lm_eval_dcpmi.hf_prefix._cache import (
    Kept,
    empty_cache,
    gather_cache,
    layer_tensors,
    output_cache,
)
from lm_eval_dcpmi.hf_prefix._check import SelfCheck, Setup
from lm_eval_dcpmi.hf_prefix._schedule import (
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
from lm_eval_dcpmi.hf_prefix._tree import Node, build_tree, divide_tops, split_tops, tree_tokens
from lm_eval_dcpmi.task import share_tokenizer, shared_tokenizer

log = logging.getLogger(__name__)
_ONE_AT_A_TIME = threading.Lock()

Score = Callable[[int, float, bool], None]  # (pair, token log-prob, token is greedy)


class PrefixHFLM(SelfCheck, HookedHFLM):
    """``HFLM`` whose ``_loglikelihood_tokens`` forwards each shared token prefix once."""

    def __init__(
        self,
        *args: Any,
        prefix_cache_mb: float | str | None = None,
        prefix_workers: int | str | None = None,
        prefix_kernels: str | None = None,
        softmax_dtype: str | torch.dtype | None = None,
        mixed_precision_dtype: str | torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
        # A tokenizer a task already loaded for these arguments (to count option tokens)
        # is the one HFLM would load: take it (HFLM accepts a tokenizer object), and
        # share ours with the tasks otherwise. Loading a GGUF file's takes 10-30 s.
        named = {k: v for k, v in kwargs.items() if isinstance(v, (str, bool, int))}
        if args and isinstance(args[0], str):
            named["pretrained"] = args[0]
        if embedded.is_embedded_file(named.get("pretrained"), named.get("gguf_file")):
            embedded.parse_once()  # built outside simple_evaluate too (benchmarks, tests)
        if not kwargs.get("tokenizer") or isinstance(kwargs["tokenizer"], str):
            kwargs["tokenizer"] = shared_tokenizer(named) or kwargs.get("tokenizer")
        super().__init__(
            *args,
            softmax_dtype=softmax_dtype,
            mixed_precision_dtype=mixed_precision_dtype,
            **kwargs,
        )
        share_tokenizer(named, self.tokenizer, self.max_length)
        # The two dtypes as HFLM documents and reads them (its __init__ arguments).
        self._softmax = _dtype(softmax_dtype)
        self._autocast = _dtype(mixed_precision_dtype)
        self._cache_mb = float(prefix_cache_mb) if prefix_cache_mb not in (None, "") else None
        # Threads scoring at once: on the CPU one per core lent to torch, else one.
        cores = torch.get_num_threads() if self.device.type == "cpu" else 1
        self._workers = int(prefix_workers) if prefix_workers not in (None, "") else cores
        # Before the self-check, which then checks the packed weights too.
        self._packed = kernels.use_packed(self.model, self.device, prefix_kernels, self._autocast)
        self._told_window = False  # the line on requests past a sliding window: said once
        # The log-probabilities' dtype (the logits' unless softmax_dtype says): hf_sum's.
        self._logprob_dtype = self._softmax or torch.float32
        # Every process gets here, in the same order: the one place for the collective
        # call that makes all processes take the self-check's decision together.
        self._setup: Setup | None = self._decide_setup() if self.backend == "causal" else None

    # ------------------------------------------------------------------ entry point
    def score_token_requests(
        self,
        requests: list[Request],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[Answer]:
        setup = self._setup
        # loglikelihood_rolling's windows (no request strings): HFLM's path, unchanged.
        if setup is None or any(request[0] is None for request in requests):
            return self.hf_score_token_requests(requests, disable_tqdm, override_bs)
        batch_size = self._rows_per_call(requests, override_bs)  # before any early return
        if not requests:
            return []
        pbar = tqdm(
            total=len(requests),
            disable=(disable_tqdm or (self.rank != 0)),
            desc="Running loglikelihood requests (shared prefixes)",
        )
        truncated = over_length(requests, self.max_length)
        truncated = sorted({*truncated, *self._past_window(requests, setup)})
        pairs = unique_pairs(requests, skip=truncated)

        def on_answer(index: int, answer: Answer) -> None:
            # The LM's documented way to report each answer (lm-eval's CachingLM stores it).
            self.cache_hook.add_partial("loglikelihood", requests[index][0], answer)
            pbar.update(1)

        answers = Answers(len(requests), pairs, on_answer, self.hf_sum)
        if truncated:
            # HFLM's own code (it feeds the cache hook itself). override_bs: HFLM must
            # not detect a batch size here, a collective call only some processes reach.
            subset = [requests[i] for i in truncated]
            hf_answers = self.hf_score_token_requests(
                subset, disable_tqdm=True, override_bs=batch_size
            )
            for i, answer in zip(truncated, hf_answers, strict=True):
                answers.put(i, answer)
            pbar.update(len(truncated))
        self._score(list(pairs), self._budget(batch_size, pairs, setup), answers.score, setup)
        pbar.close()
        return answers.in_request_order()

    def hf_sum(self, values: list[float]) -> float:
        """A continuation's log-likelihood as HFLM sums it: its tokens' log-probabilities
        summed by torch in their own dtype (in bf16, -240.3 becomes -240.0)."""
        return float(torch.tensor([values], dtype=self._logprob_dtype).sum())

    def _past_window(self, requests: Sequence[Request], setup: Setup) -> list[int]:
        """Without window masks (``Setup.window_masks``): the requests whose input is
        longer than the sliding window, where sliding and full attention differ; said
        once, in one line."""
        window = setup.window
        if window is None or setup.window_masks:
            return []
        past = [i for i, (_, c, x) in enumerate(requests) if len(c) + len(x) - 1 > window]
        if past and not self._told_window:
            self._told_window = True
            log.warning(
                "hf-prefix: %d of %d requests are longer than the model's sliding window "
                "(%d tokens) and go through hf's scoring (see the start-up warning).",
                len(past),
                len(requests),
                window,
            )
        return past

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
        if str(self.batch_size).isdecimal():
            return max(1, int(self.batch_size))
        if override_bs:
            return override_bs
        probe = (
            [max(requests, key=lambda r: len(r[1]) + len(r[2]))]
            if requests
            else [(None, [0], [0])]  # nothing to score here, but the others gather
        )
        # HFLM's own detector, as its scoring calls it for batch_size=auto (_harness._hflm).
        return max(1, self.detect_batch_size(probe))

    # ------------------------------------------------------------------ scoring
    def _score(
        self,
        pairs: Sequence[Pair],
        budget: Budget,
        score: Score,
        setup: Setup,
        model: Any = None,
    ) -> None:
        """Score every token of every pair, handing each to ``score``; ``model``: another
        model to drive instead of this one's (the self-check's reduced copy).

        With several workers (CPU: one per core), subtrees that share nothing are scored
        in as many threads at once, each with one torch thread and its share of the
        budget: on 2 cores this is 1.5x faster than one pass at a time on 2 threads
        (small matrices do not split well across cores). The numbers are the same.
        """
        tops = build_tree(pairs)
        if self._workers > 1:  # a subtree of over half a worker's share is cut (divide_tops)
            tops = divide_tops(tops, tree_tokens(tops) // (2 * self._workers) + 1)
        groups = split_tops(tops, self._workers) if self._workers > 1 else [tops]
        model = self.model if model is None else model
        if len(groups) == 1:
            return self._run_plan(model, tops, budget, score, setup)
        lock = threading.Lock()

        def locked(pair: int, value: float, greedy: bool) -> None:
            with lock:
                score(pair, value, greedy)

        # A failed worker, or SIGTERM / Ctrl-C in the main thread, stops the other workers
        # at their next pass (leaving the pool waits for them: a whole plan otherwise).
        stop = threading.Event()
        # torch's thread count is process-wide: one scoring with workers at a time.
        with _ONE_AT_A_TIME:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                with ThreadPoolExecutor(len(groups), thread_name_prefix="hf-prefix") as pool:
                    share = budget.shared(len(groups))
                    futures = [
                        pool.submit(self._run_plan, model, g, share, locked, setup, stop)
                        for g in groups
                    ]
                    try:
                        wait(futures, return_when=FIRST_EXCEPTION)
                    finally:
                        stop.set()
                    for future in futures:
                        future.result()
            finally:
                torch.set_num_threads(threads)

    def _run_plan(
        self,
        model: Any,
        tops: Sequence[Node],
        budget: Budget,
        score: Score,
        setup: Setup,
        stop: threading.Event | None = None,
    ) -> None:
        held: dict[int, Kept] = {}
        with self._inference():  # grad mode and autocast are per thread
            for step in plan(tops, budget, PACK_ROW if setup.packed else 0):
                if stop is not None and stop.is_set():
                    return  # another worker failed or the run was stopped: _score raises
                if isinstance(step, Release):
                    del held[step.id]
                    continue
                parent = held[step.parent] if step.parent is not None else None
                kept = self._forward(model, step, parent, score, setup)
                if step.keep:
                    if kept is None:  # checked by the self-check; a model could still change
                        raise RuntimeError("hf-prefix: the model returned no plain key/value cache")
                    held[step.id] = kept

    def _forward(
        self, model: Any, step: Pass, parent: Kept | None, score: Score, setup: Setup
    ) -> Kept | None:
        """Run one pass, score its targets, and return its cache if it is kept.

        Rows are right-aligned (padded on the left), so that the rows' last tokens, where
        contexts end and options start, share one column: the LM head runs on the union of
        the scored columns only. Every call takes a 4D mask: a token sees its parent's
        real slots, its own node's earlier tokens and the tokens of its ancestors in the
        row (a subtree laid out flat); padding slots see each other (no query without a
        key) and are never seen.
        """
        n_rows, width = len(step.rows), step.width
        inputs = torch.zeros((n_rows, width), dtype=torch.long)
        positions = torch.zeros((n_rows, width), dtype=torch.long)
        segment = torch.full((n_rows, width), -1, dtype=torch.long)  # -1: padding
        where: list[tuple[int, int, int, int]] = []  # (row, column, token, pair)
        for r, row in enumerate(step.rows):
            column = width - row.length
            positions[r, :column] = row.nodes[0].start
            for j, node in enumerate(row.nodes):
                n = len(node.tokens)
                inputs[r, column : column + n] = torch.tensor(node.tokens, dtype=torch.long)
                positions[r, column : column + n] = torch.arange(node.start, node.start + n)
                segment[r, column : column + n] = j
                where.extend((r, column + off, token, pair) for off, pair, token in node.targets)
                column += n
        own = segment >= 0
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        allowed = masks.sees(step.rows, segment) & causal  # [rows, q, k]
        key_positions = positions
        kwargs: dict[str, Any] = {"use_cache": step.keep, "position_ids": positions}
        if step.keep:  # a cache of plain layers, keeping every slot (cache.empty_cache)
            kwargs[setup.cache_arg] = empty_cache()
        if parent is not None:
            rows = [row.parent for row in step.rows]
            picked = torch.tensor(rows, device=parent.valid.device)
            parent_ok = parent.valid[picked].cpu()
            allowed = torch.cat([parent_ok[:, None, :].expand(-1, width, -1), allowed], -1)
            own = torch.cat([parent_ok, own], -1)
            key_positions = torch.cat([parent.positions[picked].cpu(), positions], -1)
            kwargs[setup.cache_arg] = gather_cache(parent.layers, rows, self.device)
            kwargs["use_cache"] = True
        kwargs["attention_mask"] = masks.layer_masks(
            model, self.device, allowed, positions, key_positions, setup
        )
        columns = sorted({column for _, column, _, _ in where}) or [width - 1]
        if setup.keep_arg is not None:  # only these positions go through the LM head
            kwargs[setup.keep_arg] = torch.tensor(columns)
            index = {column: i for i, column in enumerate(columns)}
        else:
            index = {column: column for column in columns}
        kwargs = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in kwargs.items()}
        out = model(input_ids=inputs.to(self.device), **kwargs)
        if where:
            r_index = torch.tensor([r for r, _, _, _ in where], device=self.device)
            c_index = torch.tensor([index[c] for _, c, _, _ in where], device=self.device)
            tokens = torch.tensor([t for _, _, t, _ in where], device=self.device)
            logprobs = F.log_softmax(out.logits[r_index, c_index], dim=-1, dtype=self._softmax)
            self._logprob_dtype = logprobs.dtype
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
        return Kept(layers, own.to(self.device), key_positions.to(self.device))

    @contextlib.contextmanager
    def _inference(self, packed: bool = True) -> Iterator[None]:
        """No gradients, the autocast HFLM's ``_model_call`` uses (``mixed_precision_dtype``)
        and, if ``packed``, the packed linear weights (``_kernels``)."""
        dtype = self._autocast
        packed = packed and getattr(self, "_packed", False)
        with (
            torch.no_grad(),
            torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype is not None),
            kernels.packed() if packed else contextlib.nullcontext(),
        ):
            yield


def _dtype(value: str | torch.dtype | None) -> torch.dtype | None:
    """``"bfloat16"`` -> ``torch.bfloat16``, as HFLM reads its dtype arguments."""
    return getattr(torch, value) if isinstance(value, str) and value else value or None
