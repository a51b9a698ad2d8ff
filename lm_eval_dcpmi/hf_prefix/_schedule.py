"""Which tokens ``hf-prefix`` puts into which forward call, and which caches it keeps.

Pure scheduling, no torch: ``PrefixHFLM`` (``lm.py``) runs what ``plan`` yields
over the prefix tree of a call's requests (``tree.py``):

* ``Pass``: one forward call. Its rows extend rows of an earlier, *kept* pass (their
  parent), or start from nothing at the tree's top. A row is one node of the tree, or
  several sibling leaves packed side by side (a 4D mask keeps them apart). A pass over
  nodes with children is kept: its key/value cache is the start of their children's rows.
* ``Release``: a kept pass's cache is no longer needed.

The tree is walked depth first, one batch of sibling nodes at a time, so the caches
alive at once are those of the kept passes on the current path from the top. Three
bounds, in ``Budget``, size the passes:

* ``tokens``: token positions per call, at most ``hf``'s largest call (``batch_size``
  rows of the longest request);
* ``memory``: what one call holds (its copy of the parent cache, the cache it builds,
  its logits and log-probabilities), at most what ``hf``'s largest call holds (its
  logits and log-probabilities, and the cache its forward builds);
* ``_cache``: the caches kept at once (the current path's kept passes), the *cache
  budget*, by default half of ``memory`` (see ``Budget``). A node whose cache alone
  would not fit is not kept: its tokens go in front of each of its children instead
  (``_tree.collapse``). Under a small budget this
  degrades step by step towards ``hf``'s cost (every request's full input forwarded),
  never beyond it, and never above the budget except for a single row that ``hf``
  itself would forward whole.

Within those bounds a pass takes more rows than ``batch_size`` when they are short
(every forward call has a fixed cost), and accepts some padding rather than one more
call (``PAD_SLACK``, ``PAD_FREE``). A small subtree (a question and its options) gets no
pass of its own: it is laid out flat in one row, each node seeing its ancestors in the
row under the 4D mask (``FLAT_ROW``), beside its siblings. Each token is still forwarded
once; a pass per level per subtree is not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi.hf_prefix._tree import Node, Tokens, collapse, walk

# (request strings or None, context tokens, continuation tokens), as HFLM receives them.
Request = tuple[Any, Sequence[int], Sequence[int]]
Answer = tuple[float, bool]
Pair = tuple[Tokens, Tokens]

# Padding a call may carry: this share of its token positions, or this many positions.
PAD_SLACK = 0.1
PAD_FREE = 32
# Tokens of one row of packed sibling leaves. Every token attends over the whole row
# (most of it masked), so rows stay short.
PACK_ROW = 128
# Tokens of a subtree laid out flat in one row (a HellaSwag context and its four endings,
# a RACE question and its options). Wider rows cost attention over masked slots: on
# samples, RACE-M took 36-38 s at 128-256 and 40 s at 512; HellaSwag 52 s at 128, 47-49 s
# at 192-256.
FLAT_ROW = 192


def over_length(requests: Sequence[Request], max_length: int) -> list[int]:
    """Indices of the requests ``hf`` left-truncates (input longer than ``max_length``)."""
    return [
        i
        for i, (_, context, continuation) in enumerate(requests)
        if len(context) + len(continuation) > max_length + 1
    ]


def unique_pairs(requests: Sequence[Request], skip: Iterable[int] = ()) -> dict[Pair, list[int]]:
    """Distinct (context, continuation) token pairs -> the indices of the requests asking
    for them (first-seen order); ``skip``: requests left out."""
    skipped = set(skip)
    pairs: dict[Pair, list[int]] = {}
    for i, (_, context, continuation) in enumerate(requests):
        if i not in skipped:
            pairs.setdefault((tuple(context), tuple(continuation)), []).append(i)
    return pairs


def longest_input(pairs: Iterable[Pair]) -> int:
    """Tokens ``hf`` forwards for the longest request: context + continuation - 1."""
    return max((len(context) + len(cont) - 1 for context, cont in pairs), default=1)


class Budget:
    """The three bounds on passes, in token positions and tensor elements (see module doc).

    ``tokens``: positions per call (``hf``'s largest call: batch_size x longest request).
    ``vocab``: logits per position; ``kv_per_token``: cache elements per position (all
    layers, keys and values). ``memory`` defaults to what ``hf``'s largest call holds: its
    logits and log-probabilities (2 x tokens x vocab) and the cache its forward builds
    (tokens x kv_per_token). ``cache`` defaults to half of that: a call and the caches kept
    at once then hold at most 1.5 times what ``hf``'s largest call holds, so that
    ``hf-prefix``'s peak stays within 1.5 times ``hf``'s at the same batch size.
    """

    def __init__(
        self,
        tokens: int,
        vocab: int,
        kv_per_token: int,
        memory: int | None = None,
        cache: int | None = None,
    ) -> None:
        self.tokens = max(1, tokens)
        self.vocab = vocab
        self.kv = kv_per_token
        self.memory = memory if memory is not None else self.tokens * (2 * vocab + kv_per_token)
        self.cache = cache if cache is not None else self.memory // 2

    def shared(self, parts: int) -> Budget:
        """This budget's memory and cache split between ``parts`` workers running at once."""
        parts = max(1, parts)
        return Budget(self.tokens, self.vocab, self.kv, self.memory // parts, self.cache // parts)

    @staticmethod
    def padding_ok(padded: int, real: int) -> bool:
        """Padding under ``PAD_SLACK`` of the call's positions, or under ``PAD_FREE``."""
        return padded - real <= max(PAD_SLACK * padded, PAD_FREE)

    def kept(self, rows: int, past: int, width: int) -> int:
        """Elements of a kept pass's cache: every row's parent slots and its own."""
        return rows * (past + width) * self.kv

    def call_memory(self, rows: int, past: int, width: int, scored: int) -> int:
        """Elements one call holds: the parent cache's copy, the new cache, and logits and
        log-probabilities at ``scored`` positions."""
        return rows * (2 * past + width) * self.kv + 2 * scored * self.vocab


@dataclass(frozen=True)
class Row:
    """One batch row: ``nodes`` side by side (one node, sibling leaves packed, or small
    subtrees laid out flat), after row ``parent`` of the parent pass's cache (None at the
    tree's top). ``links``: for each node, the index in ``nodes`` of its parent within the
    row (always earlier), -1 for a node that extends the parent cache; empty: all -1."""

    parent: int | None
    nodes: tuple[Node, ...]
    links: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        return sum(len(node.tokens) for node in self.nodes)

    def in_row_parents(self) -> tuple[int, ...]:
        return self.links or (-1,) * len(self.nodes)

    def scored_columns(self) -> set[int]:
        """Columns of the row whose logits some target needs."""
        columns, offset = set(), 0
        for node in self.nodes:
            columns.update(offset + target[0] for target in node.targets)
            offset += len(node.tokens)
        return columns


@dataclass(frozen=True)
class Pass:
    """One forward call: ``rows`` after the cache of kept pass ``parent`` (None: none),
    whose rows are ``past`` slots wide; ``keep``: its own cache is kept for the rows'
    children (each row is then one node)."""

    id: int
    parent: int | None
    past: int
    rows: list[Row]
    keep: bool

    @property
    def width(self) -> int:
        return max(row.length for row in self.rows)


@dataclass(frozen=True)
class Release:
    """Kept pass ``id``'s cache is no longer needed."""

    id: int


Step = Pass | Release


def pack(
    leaves: Sequence[Node], capacity: int, size: Callable[[Node], int] | None = None
) -> list[list[Node]]:
    """Sibling leaves in rows of at most ``capacity`` tokens: first fit, longest first; a
    longer leaf gets a row of its own; ``0``: one leaf per row. ``size``: a leaf's tokens
    (default its own; a subtree laid out flat counts all of its nodes)."""
    size = size or (lambda node: len(node.tokens))
    rows: list[list[Node]] = []
    room: list[int] = []
    for leaf in sorted(leaves, key=lambda node: (-size(node), node.tokens)):
        n = size(leaf)
        for i, free in enumerate(room):
            if n <= free:
                rows[i].append(leaf)
                room[i] -= n
                break
        else:
            rows.append([leaf])
            room.append(max(capacity - n, 0))
    return rows


class _Planner:
    def __init__(self, budget: Budget, pack_row: int) -> None:
        self.budget = budget
        self.pack_row = pack_row
        self.ids = itertools.count()

    def level(
        self, parent: int | None, past: int, items: list[tuple[int | None, Node]], held: int
    ) -> Iterator[Step]:
        """Passes for ``items`` (parent row, node) after kept pass ``parent``, and below."""
        budget, inner, leaves = self.budget, [], {}
        sizes: dict[int, int] = {}  # id(node) -> tokens of a subtree laid out flat
        for row, node in items:
            if not node.children:
                leaves.setdefault(row, []).append(node)
            elif (size := self.flat_size(node, past)) is not None:
                sizes[id(node)] = size  # no pass and no cache of its own
                leaves.setdefault(row, []).append(node)
            elif held + budget.kept(1, past, len(node.tokens)) > budget.cache:
                # Its cache alone does not fit: forward its tokens with each child instead.
                yield from self.level(parent, past, [(row, n) for n in collapse(node)], held)
            else:
                inner.append(Row(row, (node,)))
        capacity = self.pack_row if parent is not None else 0  # top rows share no cache
        leaf_rows = [
            flat_row(row, part)
            for row, nodes in leaves.items()
            for part in pack(nodes, capacity, lambda n: sizes.get(id(n), len(n.tokens)))
        ]
        for rows in self.batches(leaf_rows, past, held, keep=False):
            yield Pass(next(self.ids), parent, past, rows, keep=False)
        for rows in self.batches(inner, past, held, keep=True):
            step = Pass(next(self.ids), parent, past, rows, keep=True)
            yield step
            children = [(r, child) for r, row in enumerate(rows) for child in row.nodes[0].children]
            kept = budget.kept(len(rows), past, step.width)
            yield from self.level(step.id, past + step.width, children, held + kept)
            yield Release(step.id)

    def flat_size(self, node: Node, past: int) -> int | None:
        """Tokens of ``node``'s subtree if it is laid out flat in one row (its nodes side
        by side, each seeing its ancestors under a 4D mask), else None.

        A pass of its own costs more than its tokens on small subtrees (a call's fixed
        costs, a cache copy per child, narrow matrices), and flat, the subtree's nodes
        join the rows of their parent's level. Only with packed rows, and a subtree of at
        most ``FLAT_ROW`` tokens that fits one call's positions and memory alone.
        """
        limit = min(FLAT_ROW, self.budget.tokens) if self.pack_row else 0
        size = 0
        for part in walk([node]):
            size += len(part.tokens)
            if size > limit:
                return None
        if self.budget.call_memory(1, past, size, size) > self.budget.memory:
            return None
        return size

    def batches(self, rows: list[Row], past: int, held: int, keep: bool) -> Iterator[list[Row]]:
        """Consecutive runs of ``rows`` (longest first) that fit one pass each."""
        budget = self.budget
        batch: list[Row] = []
        width = real = 0
        columns: set[int] = set()
        for row in sorted(rows, key=lambda row: (-row.length, row.parent or 0)):
            own = row.scored_columns()
            if batch:
                n, scored = len(batch) + 1, len(columns | own)
                if (
                    n * width > budget.tokens
                    or not budget.padding_ok(n * width, real + row.length)
                    or budget.call_memory(n, past, width, n * scored) > budget.memory
                    or (keep and held + budget.kept(n, past, width) > budget.cache)
                ):
                    yield batch
                    batch, columns = [], set()
            if not batch:
                width, real = row.length, 0
            batch.append(row)
            real += row.length
            columns |= own
        if batch:
            yield batch


def flat_row(parent: int | None, units: Sequence[Node]) -> Row:
    """A row of ``units`` side by side, each with its subtree depth first after it."""
    nodes: list[Node] = []
    links: list[int] = []
    for unit in units:
        stack = [(unit, -1)]
        while stack:
            node, link = stack.pop()
            links.append(link)
            nodes.append(node)
            here = len(nodes) - 1
            stack.extend((child, here) for child in reversed(node.children))
    flat = any(link >= 0 for link in links)
    return Row(parent, tuple(nodes), tuple(links) if flat else ())


def plan(tops: Sequence[Node], budget: Budget, pack_row: int = PACK_ROW) -> Iterator[Step]:
    """The passes (and releases) that score every target of the tree under ``tops``.

    ``pack_row``: tokens per row of packed sibling leaves (``0``: one leaf per row).
    """
    return _Planner(budget, pack_row).level(None, 0, [(None, node) for node in tops], 0)


class Answers:
    """Answers in request order, summed per pair from its targets as they come.

    ``on_answer(index, answer)`` runs for every request as soon as its pair's last target
    is scored (the cache hook of ``--use_cache`` stores answers as they are computed).
    ``total``: a pair's log-likelihood from its tokens' log-probabilities in token order
    (``PrefixHFLM`` sums them as HFLM does, in their own dtype).
    """

    def __init__(
        self,
        n_requests: int,
        pairs: dict[Pair, list[int]],
        on_answer: Callable[[int, Answer], None],
        total: Callable[[list[float]], float] = sum,
    ) -> None:
        self._answers: list[Answer | None] = [None] * n_requests
        self._on_answer = on_answer
        self._total = total
        self._requests = list(pairs.values())
        self._remaining = [len(continuation) for _context, continuation in pairs]
        self._values: list[list[float]] = [[] for _ in pairs]
        self._greedy = [True] * len(pairs)

    def put(self, index: int, answer: Answer) -> None:
        """An answer computed elsewhere (HFLM's own path, which feeds the hook itself)."""
        self._answers[index] = answer

    def score(self, pair: int, logprob: float, greedy: bool) -> None:
        """One scored token of pair ``pair``."""
        self._values[pair].append(logprob)
        self._greedy[pair] = self._greedy[pair] and greedy
        self._remaining[pair] -= 1
        if self._remaining[pair] == 0:
            answer = (self._total(self._values[pair]), self._greedy[pair])
            self._values[pair] = []
            for index in self._requests[pair]:
                self._answers[index] = answer
                self._on_answer(index, answer)

    def in_request_order(self) -> list[Answer]:
        missing = [i for i, answer in enumerate(self._answers) if answer is None]
        if missing:
            raise RuntimeError(f"hf-prefix: requests {missing[:5]} were never scored")
        return self._answers  # type: ignore[return-value]
