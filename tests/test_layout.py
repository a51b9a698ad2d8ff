"""The request layout of a DC-PMI document: conditional requests, then domain requests."""

from __future__ import annotations

import doctest

import pytest

from lm_eval_dcpmi.core import layout
from lm_eval_dcpmi.core.layout import conditional_and_domain, labelled


def test_splits_into_the_conditional_half_and_the_domain_half():
    assert conditional_and_domain([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]) == (
        [-1.0, -2.0, -3.0],
        [-4.0, -5.0, -6.0],
    )
    # any per-request sequence: tuples of arguments, lm-eval's results, counts
    assert conditional_and_domain((("p", " a"), ("d", " a"))) == ([("p", " a")], [("d", " a")])
    assert conditional_and_domain([]) == ([], [])


def test_returns_new_lists():
    values = [1, 2]
    conditional, domain = conditional_and_domain(values)
    conditional.append(3)
    assert values == [1, 2] and domain == [2]


@pytest.mark.parametrize("n", [1, 3, 5])
def test_an_odd_number_of_requests_is_refused(n):
    with pytest.raises(ValueError, match=rf"2 requests per option.*got {n}$"):
        conditional_and_domain(list(range(n)))


def test_labelled_names_each_request_kind_and_option():
    assert labelled(["c0", "c1", "c2", "d0", "d1", "d2"]) == [
        ("conditional", 0, "c0"),
        ("conditional", 1, "c1"),
        ("conditional", 2, "c2"),
        ("domain", 0, "d0"),
        ("domain", 1, "d1"),
        ("domain", 2, "d2"),
    ]
    with pytest.raises(ValueError, match="got 3"):
        labelled([1, 2, 3])


def test_the_docstring_examples_hold():
    assert doctest.testmod(layout).failed == 0
