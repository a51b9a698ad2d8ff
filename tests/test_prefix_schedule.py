"""hf-prefix's scheduling (``prefix_schedule``) on made-up token tuples: no model, no torch.

Expected batches are computed by hand from the rules in the module's docstrings.
"""

from __future__ import annotations

import random

import pytest

from lm_eval_dcpmi.prefix_schedule import (
    Answers,
    Budget,
    ContextPass,
    group_requests,
    longest_input,
    over_length,
    pack,
    plan,
    steps,
)


def ctx(n: int, start: int = 1) -> tuple[int, ...]:
    """A context of ``n`` tokens."""
    return tuple(range(start, start + n))


# ---------------------------------------------------------------- requests
def test_over_length_is_hfs_left_truncation_rule():
    requests = [
        (("a", "b"), [1, 2, 3], [4, 5]),  # 5 tokens = max_length + 1: kept
        (("c", "d"), [1, 2, 3, 4], [5, 6]),  # 6 tokens: hf left-truncates
        (("e", "f"), [1], [2, 3, 4, 5, 6]),  # 6 tokens, long continuation
    ]
    assert over_length(requests, max_length=4) == [1, 2]
    assert over_length(requests, max_length=5) == []


def test_group_requests_keeps_every_index_and_first_seen_order():
    requests = [
        (None, [1, 2], [3]),
        (None, [9], [8, 7]),
        (None, [1, 2], [4, 5]),
        (None, [1, 2], [3]),  # duplicate of request 0
        (None, [9], [8, 7]),  # duplicate of request 1, skipped below
    ]
    groups = group_requests(requests, skip=[4])
    assert groups == {(1, 2): {(3,): [0, 3], (4, 5): [2]}, (9,): {(8, 7): [1]}}
    assert list(groups) == [(1, 2), (9,)]
    assert list(groups[(1, 2)]) == [(3,), (4, 5)]


@pytest.mark.parametrize("request_", [(None, [], [1]), (None, [1], [])])
def test_group_requests_refuses_empty_context_or_continuation(request_):
    with pytest.raises(ValueError, match="request 1: context and continuation"):
        group_requests([(None, [5], [6]), request_])


def test_longest_input_is_context_plus_continuation_minus_one():
    assert longest_input({(1, 2, 3): [(4,), (5, 6, 7)], (1,): [(2, 3)]}) == 5
    assert longest_input({}) == 1


# ---------------------------------------------------------------- rows
def test_steps_counts_continuations_without_their_last_token():
    assert steps([(1, 2, 3), (4, 5)]) == 3
    assert steps([(1,)]) == 0


def test_pack_first_fit_longest_first():
    a, b, c, d = (1, 2, 3, 4, 5), (6, 7, 8), (9, 10), (11, 12, 13)  # steps 4, 2, 1, 2
    # Sorted: a (room 5-4=1), b (no room in row 0: new row, room 3), d (row 1, room 1),
    # c (1 step: row 0's last slot).
    assert pack([c, b, a, d], capacity=5) == [[a, c], [b, d]]


def test_pack_zero_capacity_is_one_continuation_per_row():
    a, b, c = (1, 2, 3), (4, 5), (6, 7, 8)
    assert pack([b, a, c], capacity=0) == [[a], [c], [b]]


def test_pack_gives_a_too_long_continuation_a_row_of_its_own():
    long, short = tuple(range(10)), (1, 2)
    assert pack([short, long], capacity=3) == [[long], [short]]


# ---------------------------------------------------------------- budget
@pytest.mark.parametrize(
    ("padded", "real", "ok"),
    [
        (100, 68, True),  # 32 padding positions: free
        (100, 67, False),  # 33 > max(10, 32)
        (400, 360, True),  # 40 = 10% of 400
        (400, 359, False),
    ],
)
def test_padding_rule(padded, real, ok):
    assert Budget.padding_ok(padded, real) is ok


def test_context_batches_token_limit():
    contexts = [ctx(10), ctx(9), ctx(8), ctx(3)]
    # Padded to the first (longest) context: 2 x 10, 3 x 10 = 30 <= 30, then 4 x 10 > 30.
    budget = Budget(tokens=30, vocab=1, kv_per_token=0)
    assert list(budget.context_batches(contexts)) == [contexts[:3], contexts[3:]]


def test_context_batches_own_token_limit():
    budget = Budget(tokens=1000, vocab=1, kv_per_token=0, context_tokens=15)
    assert list(budget.context_batches([ctx(10), ctx(9)])) == [[ctx(10)], [ctx(9)]]


def test_context_batches_memory_limit():
    # memory = 2 x 30 x 1 = 60; a context pass may hold half: padded x kv + rows x vocab.
    # [10, 9]: 20 + 2 = 22 <= 30; [10, 9, 8]: 30 + 3 > 30. [8, 3]: 16 + 2.
    budget = Budget(tokens=30, vocab=1, kv_per_token=1)
    contexts = [ctx(10), ctx(9), ctx(8), ctx(3)]
    assert list(budget.context_batches(contexts)) == [contexts[:2], contexts[2:]]


def test_context_batches_padding_limit():
    budget = Budget(tokens=10_000, vocab=1, kv_per_token=0)
    # 100 + 50 padded to 200: 50 padding > 32; 100 + 70: 30 padding.
    assert list(budget.context_batches([ctx(100), ctx(50)])) == [[ctx(100)], [ctx(50)]]
    assert list(budget.context_batches([ctx(100), ctx(70)])) == [[ctx(100), ctx(70)]]


def test_cache_memory_counts_padded_cache_and_last_logprobs():
    budget = Budget(tokens=10, vocab=7, kv_per_token=2)
    assert budget.cache_memory([ctx(3), ctx(2)]) == 2 * (3 * 2 + 7)


def test_continuation_batches_token_limit():
    budget = Budget(tokens=12, vocab=1, kv_per_token=0)
    # a+b: 2 rows x 5 steps = 10; memory 2 x 2 x 5 = 20 <= 24; +c: 3 x 5 = 15 > 12.
    batches = budget.continuation_batches("abc", [5, 4, 1], [10, 20, 3], held_memory=0)
    assert list(batches) == [["a", "b"], ["c"]]


def test_continuation_batches_memory_counts_held_cache_and_copies():
    # memory 200; two rows of 5 steps on contexts up to 20 slots:
    # held + 2 x ((20 + 5) x kv + 2 x 5 x vocab) = held + 70.
    budget = Budget(tokens=100, vocab=1, kv_per_token=1)
    assert list(budget.continuation_batches("ab", [5, 5], [10, 20], 150)) == [["a"], ["b"]]
    assert list(budget.continuation_batches("ab", [5, 5], [10, 20], 130)) == [["a", "b"]]


def test_continuation_batches_padding_limit():
    budget = Budget(tokens=10_000, vocab=1, kv_per_token=0)
    # Rows padded to the first row's 100 steps: 100 + 60 real of 200 -> 40 padding > 32.
    assert list(budget.continuation_batches("ab", [100, 60], [1, 1], 0)) == [["a"], ["b"]]
    assert list(budget.continuation_batches("ab", [100, 70], [1, 1], 0)) == [["a", "b"]]


# ---------------------------------------------------------------- plan
A, B, C = ctx(4), ctx(2, start=11), ctx(1, start=21)
GROUPS = {
    B: [(13, 14, 15)],
    A: [(5,), (6, 7, 8), (9, 10)],
    C: [(22,)],
}


def test_plan_packed_rows():
    # Contexts longest first: [A, B] padded to 8 tokens (= budget), C alone.
    # A's one-token continuation is scored by the context pass; its two longer ones share
    # a row (2 + 1 steps); B's row (2 steps) joins: 2 x 3 = 6 tokens, memory
    # 2 (held) + 2 x 2 x 3 = 14 <= 16, 1 padding position.
    budget = Budget(tokens=8, vocab=1, kv_per_token=0)
    assert list(plan(GROUPS, budget, pack_row=128)) == [
        ContextPass(
            contexts=[A, B],
            one_token=[(0, (5,))],
            continuation_batches=[[(0, [(6, 7, 8), (9, 10)]), (1, [(13, 14, 15)])]],
        ),
        ContextPass(contexts=[C], one_token=[(0, (22,))], continuation_batches=[]),
    ]


def test_plan_one_continuation_per_row():
    budget = Budget(tokens=8, vocab=1, kv_per_token=0)
    first, second = plan(GROUPS, budget, pack_row=0)
    # Rows longest first, then by context: (A: 2 steps), (B: 2 steps), (A: 1 step).
    assert first.continuation_batches == [[(0, [(6, 7, 8)]), (1, [(13, 14, 15)]), (0, [(9, 10)])]]
    assert second == ContextPass([C], [(0, (22,))], [])


def test_plan_scores_every_pair_once_within_budget():
    rng = random.Random(7)
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for _ in range(40):
        context = tuple(rng.randrange(50) for _ in range(rng.randint(1, 30)))
        conts = {tuple(rng.randrange(50) for _ in range(rng.randint(1, 12))) for _ in range(5)}
        groups.setdefault(context, []).extend(sorted(conts))
    budget = Budget(tokens=64, vocab=10, kv_per_token=4)
    seen = []
    for step in plan(groups, budget, pack_row=16):
        widths = [len(c) for c in step.contexts]
        assert widths == sorted(widths, reverse=True)
        assert len(step.contexts) == 1 or len(step.contexts) * widths[0] <= budget.tokens
        seen += [(step.contexts[g], cont) for g, cont in step.one_token]
        for batch in step.continuation_batches:
            width = max(steps(conts) for _, conts in batch)
            assert len(batch) == 1 or len(batch) * width <= budget.tokens
            for g, conts in batch:
                assert steps(conts) <= 16 or len(conts) == 1
                seen += [(step.contexts[g], cont) for cont in conts]
    expected = [(context, cont) for context, conts in groups.items() for cont in conts]
    assert sorted(seen) == sorted(expected)


# ---------------------------------------------------------------- answers
def test_answers_restore_request_order_and_report_each_as_it_comes():
    requests = [
        (("p", " x"), [1, 2], [3]),
        (("q", " y z"), [9], [8, 7]),
        (("p", " w"), [1, 2], [4, 5]),
        (("p", " x"), [1, 2], [3]),  # duplicate: answered by the same emit
        (("long", "!"), [1] * 10, [2]),  # answered elsewhere (hf's path)
    ]
    groups = group_requests(requests, skip=[4])
    reported: list[tuple[int, tuple[float, bool]]] = []
    answers = Answers(len(requests), groups, lambda i, a: reported.append((i, a)))
    answers.put(4, (-9.0, False))
    answers.emit((9,), (8, 7), (-2.0, False))
    answers.emit((1, 2), (3,), (-1.0, True))
    with pytest.raises(RuntimeError, match=r"requests \[2\] were never scored"):
        answers.in_request_order()
    answers.emit((1, 2), (4, 5), (-3.0, False))
    assert answers.in_request_order() == [
        (-1.0, True),
        (-2.0, False),
        (-3.0, False),
        (-1.0, True),
        (-9.0, False),
    ]
    # Reported in the order computed, every duplicate; not the one put from elsewhere.
    assert reported == [
        (1, (-2.0, False)),
        (0, (-1.0, True)),
        (3, (-1.0, True)),
        (2, (-3.0, False)),
    ]
