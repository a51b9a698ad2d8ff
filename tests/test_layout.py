"""The request layout of a DC-PMI document: conditional requests, then domain requests."""

from __future__ import annotations

import doctest

import pytest

from lm_eval_dcpmi.rules import _layout as layout
from lm_eval_dcpmi.rules._layout import conditional_and_domain, labelled

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast


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


def test_a_layout_cuts_reference_and_content_free_blocks():
    two = layout.Layout(("domain", "empty"), ("N/A", "", "[MASK]"))
    values = ["c0", "c1", "d0", "d1", "e0", "e1"]
    blocks = two.blocks(values, 2, carrier=False)
    assert blocks.conditional == ["c0", "c1"]
    assert blocks.references == {"domain": ["d0", "d1"], "empty": ["e0", "e1"]}
    assert blocks.domain == ["d0", "d1"] and blocks.content_free is None
    carrier = two.blocks([*values, "n0", "n1", "z0", "z1", "m0", "m1"], 2, carrier=True)
    assert carrier.content_free == {"N/A": ["n0", "n1"], "": ["z0", "z1"], "[MASK]": ["m0", "m1"]}
    assert two.n_requests(2) == 6 and two.n_requests(2, carrier=True) == 12
    with pytest.raises(ValueError, match="has 6 requests"):
        two.blocks(values[:4], 2, carrier=False)
    assert two.labelled(values, 2, False)[4:] == [("empty", 0, "e0"), ("empty", 1, "e1")]
    labels = two.labelled([*values, *"abcdef"], 2, True)
    assert labels[6] == ("content-free 'N/A'", 0, "a") and labels[11][:2] == (
        "content-free '[MASK]'",
        1,
    )


def test_a_samples_reader_finds_the_options_and_the_carrier_from_the_continuations():
    free = layout.Layout(("domain",), ("N/A", "", "[MASK]"))
    assert free.n_options([" a", " b", " a", " b"]) == (2, False)
    assert free.n_options([" a", " b"] * 5) == (2, True)
    # a repeated option cannot pass for the carrier's blocks
    assert free.n_options([" a", " a", " b", " b"] * 1 + [" a", " a", " b", " b"]) == (4, False)
    with pytest.raises(ValueError, match="not 2 or 5 blocks"):
        free.n_options([" a", " b", " b", " a"])
    assert layout.DEFAULT_LAYOUT.n_options([" x"] * 2) == (1, False)
    # an empty reference context's requests carry the premise's trailing whitespace (a
    # RACE question ending in "\n "): the same options, as the priors study logs them
    priors = layout.Layout(("domain", "empty"))
    assert priors.n_options(["  a.", "  b."] * 2 + ["\n   a.", "\n   b."]) == (2, False)
    with pytest.raises(ValueError):
        priors.n_options(["  a.", "  b."] * 2 + ["\n   b.", "\n   a."])


def test_the_first_reference_context_is_the_domain_premise():
    with pytest.raises(ValueError, match="first reference context"):
        layout.Layout(("empty", "domain"))
    with pytest.raises(ValueError, match="repeat"):
        layout.Layout(("domain", "a", "a"))
