"""How a DC-PMI document's requests are laid out, in one place.

``DCPMITask.construct_requests`` returns one conditional request ``(premise, option)``
per option, then one domain request ``(domain premise, option)`` per option, both in
option order. Everything lm-eval keeps per request follows that order: the instances,
their results, and the samples' ``arguments``, ``resps`` and ``filtered_resps``. Code
that needs the two halves asks ``conditional_and_domain`` rather than cutting at
``len(...) // 2`` itself, so that the layout has one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def conditional_and_domain(per_request: Sequence[T]) -> tuple[list[T], list[T]]:
    """A document's per-request values split into the conditional requests' and the domain
    requests' (each in option order); ``ValueError`` when their number is odd.

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
    """Each of a document's per-request values with its request's kind (``"conditional"``
    or ``"domain"``) and option index, in request order; for messages that name them.

    >>> labelled(["c0", "c1", "d0", "d1"])[1:3]
    [('conditional', 1, 'c1'), ('domain', 0, 'd0')]
    """
    conditional, domain = conditional_and_domain(per_request)
    return [("conditional", i, value) for i, value in enumerate(conditional)] + [
        ("domain", i, value) for i, value in enumerate(domain)
    ]
