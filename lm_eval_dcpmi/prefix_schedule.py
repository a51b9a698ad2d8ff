"""Which contexts and continuations ``hf-prefix`` puts into which forward call.

Pure scheduling on token tuples, no torch: ``PrefixHFLM`` (``prefix_lm.py``) runs the
forward calls this module plans. A plan is a sequence of ``ContextPass``: one forward
call over several contexts (right-padded), the one-token continuations its last logits
score, and the batches of multi-token continuation rows run on its key/value cache.

Calls are sized by a ``Budget`` derived from what ``hf`` itself would do with the same
requests and ``batch_size``: no call forwards more token positions than ``hf``'s
largest call (``batch_size`` rows of the longest request), and what a call holds (the
cache, its per-row copies, logits and log-probabilities) stays within the memory of
that call's logits and log-probabilities. Within those bounds a call takes more rows
than ``batch_size`` when they are short (every forward call has a fixed cost), and it
accepts some padding rather than one more call (``PAD_SLACK``, ``PAD_FREE``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Tokens = tuple[int, ...]
# (request strings or None, context tokens, continuation tokens), as HFLM receives them.
Request = tuple[Any, Sequence[int], Sequence[int]]
Answer = tuple[float, bool]
Emit = Callable[[Tokens, Tokens, Answer], None]
# context -> continuation -> indices of the requests asking for that pair
Groups = dict[Tokens, dict[Tokens, list[int]]]
# A continuation row: (index of its context in the context pass, continuations in it).
Row = tuple[int, list[Tokens]]

# Padding a call may carry: this share of its token positions, or this many positions.
PAD_SLACK = 0.1
PAD_FREE = 32
# Tokens of one row of packed continuations (of one context). Every continuation token
# attends over the whole row (most of it masked), so rows stay short.
PACK_ROW = 128


def over_length(requests: Sequence[Request], max_length: int) -> list[int]:
    """Indices of the requests ``hf`` left-truncates (input longer than ``max_length``)."""
    return [
        i
        for i, (_, context, continuation) in enumerate(requests)
        if len(context) + len(continuation) > max_length + 1
    ]


def group_requests(requests: Sequence[Request], skip: Iterable[int] = ()) -> Groups:
    """Requests by context, then continuation (first-seen order); ``skip``: left out."""
    skipped = set(skip)
    groups: Groups = {}
    for i, (_, context, continuation) in enumerate(requests):
        if i in skipped:
            continue
        if not context or not continuation:
            raise ValueError(f"request {i}: context and continuation need a token each")
        groups.setdefault(tuple(context), {}).setdefault(tuple(continuation), []).append(i)
    return groups


def longest_input(groups: Mapping[Tokens, Iterable[Tokens]]) -> int:
    """Tokens ``hf`` forwards for the longest request: context + continuation - 1."""
    return max(
        (len(context) + len(cont) - 1 for context, conts in groups.items() for cont in conts),
        default=1,
    )


def steps(conts: Sequence[Tokens]) -> int:
    """Tokens a row of continuations forwards (each without its last token)."""
    return sum(len(cont) - 1 for cont in conts)


def pack(conts: Sequence[Tokens], capacity: int) -> list[list[Tokens]]:
    """Continuations of one context in rows of at most ``capacity`` tokens.

    First fit, longest first; a longer continuation gets a row of its own; ``0``: one
    continuation per row.
    """
    rows: list[list[Tokens]] = []
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


class Budget:
    """Sizes forward calls so that none is larger than the largest call ``hf`` would make.

    ``tokens``: token positions per call, as ``hf``'s largest call (batch_size rows x
    the longest request); ``context_tokens`` may set another bound for context passes.
    Memory, in tensor elements: ``hf``'s call holds ``tokens x vocab`` logits and as
    many log-probabilities. A context pass's cache (``kv_per_token`` elements per
    position, plus its last log-probs) may take half of that; a continuation pass adds
    its cache copies, logits and log-probabilities.
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
    def padding_ok(padded: int, real: int) -> bool:
        """Padding under ``PAD_SLACK`` of the call's positions, or under ``PAD_FREE``."""
        return padded - real <= max(PAD_SLACK * padded, PAD_FREE)

    def cache_memory(self, contexts: Sequence[Tokens]) -> int:
        """Elements a context pass keeps: its (padded) cache and last log-probs."""
        return len(contexts) * (len(contexts[0]) * self.kv + self.vocab)

    def context_batches(self, contexts: Sequence[Tokens]) -> Iterator[list[Tokens]]:
        """Consecutive runs of ``contexts`` (longest first) that fit one context pass."""
        batch: list[Tokens] = []
        width = real = 0
        for context in contexts:
            if batch:
                padded = (len(batch) + 1) * width
                if (
                    padded > self.context_tokens
                    or padded * self.kv + (len(batch) + 1) * self.vocab > self.memory // 2
                    or not self.padding_ok(padded, real + len(context))
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
    ) -> Iterator[list[Any]]:
        """Consecutive runs of continuation rows (longest first) for one pass each.

        ``sizes``: the tokens each row forwards; ``widths``: its context's length;
        ``held_memory``: what the context pass keeps meanwhile.
        """
        batch: list[Any] = []
        width_steps = width = real = 0
        for item, size, item_width in zip(items, sizes, widths, strict=True):
            if batch:
                rows = len(batch) + 1
                wider = max(width, item_width)
                memory = held_memory + rows * (
                    (wider + width_steps) * self.kv + 2 * width_steps * self.vocab
                )
                if (
                    rows * width_steps > self.tokens
                    or memory > self.memory
                    or not self.padding_ok(rows * width_steps, real + size)
                ):
                    yield batch
                    batch = []
            if not batch:
                width_steps, width, real = size, 0, 0
            batch.append(item)
            width = max(width, item_width)
            real += size
        if batch:
            yield batch


@dataclass(frozen=True)
class ContextPass:
    """One forward call over ``contexts`` and what is scored on its result.

    ``one_token``: (context index, continuation) scored by the context pass's last
    logits alone; ``continuation_batches``: one continuation pass each, on copies of the
    contexts' cache.
    """

    contexts: list[Tokens]
    one_token: list[tuple[int, Tokens]]
    continuation_batches: list[list[Row]]


def plan(
    groups: Mapping[Tokens, Iterable[Tokens]], budget: Budget, pack_row: int
) -> Iterator[ContextPass]:
    """The forward calls scoring every (context, continuation) of ``groups``.

    Longest contexts first, as HFLM (an out-of-memory error comes at once); within a
    context pass, longest continuation rows first, so a call holds rows of similar
    lengths. ``pack_row``: tokens per packed row (``0``: one continuation per row).
    """
    order = sorted(groups, key=lambda context: (-len(context), context))
    for contexts in budget.context_batches(order):
        one_token: list[tuple[int, Tokens]] = []
        longer: dict[int, list[Tokens]] = {}
        for g, context in enumerate(contexts):
            for cont in groups[context]:
                if len(cont) == 1:
                    one_token.append((g, cont))
                else:
                    longer.setdefault(g, []).append(cont)
        rows: list[Row] = [
            (g, part) for g, conts in longer.items() for part in pack(conts, pack_row)
        ]
        rows.sort(key=lambda row: (-steps(row[1]), row[0]))
        batches = budget.continuation_batches(
            rows,
            [steps(conts) for _, conts in rows],
            [len(contexts[g]) for g, _ in rows],
            budget.cache_memory(contexts),
        )
        yield ContextPass(contexts, one_token, list(batches))


class Answers:
    """Answers in request order, filled per (context, continuation) as they come.

    ``on_answer(index, answer)`` runs for every request an ``emit`` answers, at once (the
    cache hook of ``--use_cache`` stores answers as they are computed).
    """

    def __init__(
        self, n_requests: int, groups: Groups, on_answer: Callable[[int, Answer], None]
    ) -> None:
        self._answers: list[Answer | None] = [None] * n_requests
        self._groups = groups
        self._on_answer = on_answer

    def put(self, index: int, answer: Answer) -> None:
        """An answer computed elsewhere (HFLM's own path, which feeds the hook itself)."""
        self._answers[index] = answer

    def emit(self, context: Tokens, continuation: Tokens, answer: Answer) -> None:
        for index in self._groups[context][continuation]:
            self._answers[index] = answer
            self._on_answer(index, answer)

    def in_request_order(self) -> list[Answer]:
        missing = [i for i, answer in enumerate(self._answers) if answer is None]
        if missing:
            raise RuntimeError(f"hf-prefix: requests {missing[:5]} were never scored")
        return self._answers  # type: ignore[return-value]
