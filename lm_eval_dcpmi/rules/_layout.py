"""How a DC-PMI document's requests are laid out, in one place.

``DCPMITask.construct_requests`` returns, in this order, each in option order:

1. the conditional requests ``(premise, option)``;
2. for each reference context the task declares (``domain``, the paper's domain premise,
   first; the priors study adds more), the requests ``(reference context, option)``;
3. on one document per evaluated set only (the *carrier*: the first document a process
   builds), for each content-free input of contextual calibration, the requests
   ``(prompt around the content-free input, option)``: the same for every document, so a
   task pays for them once, not once per document.

Everything lm-eval keeps per request follows that order: the instances, their results,
and the samples' ``arguments``, ``resps`` and ``filtered_resps``. Code that needs the
blocks asks ``Layout.blocks`` rather than cutting lists itself, so that the layout has
one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

CONDITIONAL = "conditional"
# The reference context of the paper, the task's domain premise: always the first block
# after the conditional one (defined here only; scoring and references import it).
DOMAIN = "domain"


@dataclass(frozen=True)
class Blocks(Generic[T]):
    """One document's per-request values, cut into the layout's blocks."""

    conditional: list[T]
    references: dict[str, list[T]]  # reference context name -> values, declared order
    content_free: dict[str, list[T]] | None  # content-free input -> values; None: not the carrier

    @property
    def domain(self) -> list[T]:
        return self.references[DOMAIN]


@dataclass(frozen=True)
class Layout:
    """The blocks of a task's documents: its reference contexts and content-free inputs."""

    references: tuple[str, ...] = (DOMAIN,)
    content_free: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.references or self.references[0] != DOMAIN:
            raise ValueError(f"the first reference context is {DOMAIN!r}: {self.references}")
        if len(set(self.references)) != len(self.references):
            raise ValueError(f"reference context names repeat: {self.references}")

    def block_names(self, carrier: bool) -> list[tuple[str, str]]:
        """(kind, name) of each block in request order; kind is ``conditional``,
        ``reference`` or ``content_free``."""
        names = [(CONDITIONAL, CONDITIONAL)] + [("reference", r) for r in self.references]
        if carrier:
            names += [("content_free", c) for c in self.content_free]
        return names

    def n_requests(self, n_options: int, carrier: bool = False) -> int:
        return n_options * len(self.block_names(carrier))

    def n_options(self, continuations: Sequence[str]) -> tuple[int, bool]:
        """(options, is the carrier) of a document from its requests' continuations alone
        (a samples file): the block count that divides them into equal blocks scoring the
        same continuations. A plain document is tried first. Continuations count as the
        same up to leading whitespace: an empty reference context's requests carry the
        premise's trailing whitespace in front of the option (``DCPMITask.construct_requests``),
        which some documents have (a RACE question ending in a newline)."""
        total = len(continuations)
        counts = [(len(self.block_names(False)), False)]
        if self.content_free:
            counts.append((len(self.block_names(True)), True))
        for blocks, carrier in counts:
            if total and total % blocks == 0:
                n = total // blocks
                if all(_same(continuations[i], continuations[i % n]) for i in range(total)):
                    return n, carrier
        raise ValueError(
            f"{total} requests are not {' or '.join(str(b) for b, _ in counts)} blocks scoring "
            f"the same options (reference contexts {list(self.references)}"
            + (f", content-free inputs {list(self.content_free)})" if self.content_free else ")")
        )

    def blocks(self, per_request: Sequence[T], n_options: int, carrier: bool) -> Blocks[T]:
        """A document's per-request values cut into blocks; ``ValueError`` when their number
        is not the layout's for ``n_options`` options."""
        names = self.block_names(carrier)
        if n_options < 1 or len(per_request) != n_options * len(names):
            raise ValueError(
                f"a DC-PMI document with {n_options} options has {n_options * len(names)} "
                f"requests here ({len(names)} blocks: {[name for _, name in names]}); got "
                f"{len(per_request)}"
            )
        cut = [list(per_request[i * n_options : (i + 1) * n_options]) for i in range(len(names))]
        references = {name: cut[i] for i, (kind, name) in enumerate(names) if kind == "reference"}
        free = {name: cut[i] for i, (kind, name) in enumerate(names) if kind == "content_free"}
        return Blocks(cut[0], references, free if carrier else None)

    def tied(self, pairs: Sequence[T], n_options: int, carrier: bool) -> tuple[str, ...]:
        """The reference contexts whose requests are the document's conditional requests,
        option for option (``pairs``: each request's (context, continuation)): PMI under
        them scores every option 0, whatever the model.

        >>> Layout().tied([("Q: x?", " a"), ("Q: x?", " b")] * 2, 2, False)
        ('domain',)
        """
        blocks = self.blocks(pairs, n_options, carrier)
        return tuple(
            name for name, block in blocks.references.items() if block == blocks.conditional
        )

    def labelled(
        self, per_request: Sequence[T], n_options: int, carrier: bool
    ) -> list[tuple[str, int, T]]:
        """Each per-request value with its request's kind (``conditional``, ``domain`` or
        another reference context's name, ``content-free 'N/A'``) and option index, in
        request order; for messages that name them."""
        self.blocks(per_request, n_options, carrier)  # checks the count
        names, labels = self.block_names(carrier), []
        for i, value in enumerate(per_request):
            kind, name = names[i // n_options]
            label = f"content-free {name!r}" if kind == "content_free" else name
            labels.append((label, i % n_options, value))
        return labels


DEFAULT_LAYOUT = Layout()


def conditional_and_domain(per_request: Sequence[T]) -> tuple[list[T], list[T]]:
    """A document's per-request values under the default layout (conditional, then domain;
    no other reference context, not the carrier); ``ValueError`` when their number is odd.

    >>> conditional_and_domain(["c0", "c1", "d0", "d1"])
    (['c0', 'c1'], ['d0', 'd1'])
    """
    if len(per_request) % 2:
        raise ValueError(
            f"a DC-PMI document has 2 requests per option (the conditional ones, then the "
            f"domain ones), so an even number of them; got {len(per_request)}"
        )
    half = len(per_request) // 2
    return list(per_request[:half]), list(per_request[half:])


def labelled(per_request: Sequence[T]) -> list[tuple[str, int, T]]:
    """``Layout.labelled`` under the default layout.

    >>> labelled(["c0", "c1", "d0", "d1"])[1:3]
    [('conditional', 1, 'c1'), ('domain', 0, 'd0')]
    """
    conditional, _ = conditional_and_domain(per_request)
    return DEFAULT_LAYOUT.labelled(per_request, len(conditional), False)


def _same(continuation: str, option: str) -> bool:
    return continuation == option or continuation.lstrip() == option.lstrip()
