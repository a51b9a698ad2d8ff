"""hf-prefix's prefix tree (``prefix_tree``) and pass planning (``prefix_schedule``) on
made-up token tuples: no model, no torch.

Expected trees and passes are worked out by hand from the rules in the modules'
docstrings; a simulation replays random plans and checks, position by position, that
every scored token would be read from the logits of exactly the right input prefix.
"""

from __future__ import annotations

import random

import pytest

from lm_eval_dcpmi.hf_prefix._schedule import (
    PACK_ROW,
    Answers,
    Budget,
    Pass,
    Release,
    longest_input,
    over_length,
    pack,
    plan,
    unique_pairs,
)
from lm_eval_dcpmi.hf_prefix._tree import (
    Node,
    build_tree,
    collapse,
    common_prefix,
    divide_tops,
    split_tops,
    tree_tokens,
    walk,
)

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast


def shape(nodes: list[Node]) -> list:
    """A tree as nested (tokens, start, sorted targets, children) tuples, children sorted."""
    return sorted(
        (node.tokens, node.start, sorted(node.targets), shape(node.children)) for node in nodes
    )


# ---------------------------------------------------------------- requests
def test_over_length_is_hfs_left_truncation_rule():
    requests = [(None, [1] * 5, [2] * 4), (None, [1] * 6, [2] * 4), (None, [1], [2] * 10)]
    assert over_length(requests, max_length=8) == [1, 2]  # 9 tokens fit a window of 8 + 1


def test_unique_pairs_keeps_every_index_in_first_seen_order():
    requests = [("a", [1, 2], [3]), ("b", [1, 2], [4]), ("a", [1, 2], [3]), ("c", [5], [6])]
    assert unique_pairs(requests, skip=[3]) == {((1, 2), (3,)): [0, 2], ((1, 2), (4,)): [1]}


def test_longest_input_is_context_plus_continuation_minus_one():
    assert longest_input([((1, 2, 3), (4, 5)), ((1,), (2,))]) == 4


def test_common_prefix():
    assert common_prefix((1, 2, 3, 4), (1, 2, 9)) == 2
    assert common_prefix((1, 2), (1, 2, 3)) == 2
    assert common_prefix((5,), (1,)) == 0
    assert common_prefix(tuple(range(1000)), (*range(777), -1)) == 777


# ---------------------------------------------------------------- the tree
def test_tree_shares_every_common_prefix_and_places_each_target_once():
    pairs = [
        ((1, 2, 3), (4, 5)),  # input 1 2 3 4: scores 4 at position 2, 5 at position 3
        ((1, 2, 3), (6,)),  # input 1 2 3: scores 6 at position 2
        ((1, 2), (7, 8)),  # input 1 2 7: splits "2 3" after 2
        ((9,), (1,)),
    ]
    tops = build_tree(pairs)
    assert shape(tops) == [
        (
            (1, 2),
            0,
            [(1, 2, 7)],  # offset 1 = position 1 (token 2): scores 7 for pair 2
            [
                ((3,), 2, [(0, 0, 4), (0, 1, 6)], [((4,), 3, [(0, 0, 5)], [])]),
                ((7,), 2, [(0, 2, 8)], []),
            ],
        ),
        ((9,), 0, [(0, 3, 1)], []),
    ]
    assert tree_tokens(tops) == 6  # 1 2 | 3 | 4 | 7 | 9, against 4 + 3 + 3 + 1 = 11 for hf
    for node in walk(tops):
        assert all(child.parent is node for child in node.children)


def test_tree_of_one_input_is_one_node_and_a_prefix_input_ends_inside_it():
    tops = build_tree([((1, 2, 3), (4, 5)), ((1, 2), (3, 4, 9))])  # inputs 1234 and 1234
    assert shape(tops) == [
        ((1, 2, 3, 4), 0, sorted([(1, 1, 3), (2, 0, 4), (2, 1, 4), (3, 0, 5), (3, 1, 9)]), [])
    ]
    (top,) = build_tree([((1, 2, 3, 4, 5), (6,)), ((1, 2), (3,))])  # input 12 inside 12345
    assert (top.tokens, top.children[0].tokens) == ((1, 2), (3, 4, 5))
    assert top.targets == [(1, 1, 3)] and top.children[0].targets == [(2, 0, 6)]


def test_tree_refuses_empty_context_or_continuation():
    with pytest.raises(ValueError, match="pair 1: context and continuation need a token each"):
        build_tree([((1,), (2,)), ((), (2,))])


def test_collapse_puts_the_parents_tokens_in_front_of_each_child():
    (top,) = build_tree([((1, 2), (3, 4)), ((1, 2), (5, 6)), ((1, 2), (7,))])
    assert top.tokens == (1, 2) and len(top.children) == 2
    merged = collapse(top)
    assert shape(merged) == [
        ((1, 2, 3), 0, [(1, 0, 3), (1, 1, 5), (1, 2, 7), (2, 0, 4)], []),
        ((1, 2, 5), 0, [(2, 1, 6)], []),
    ]
    leaf = merged[0]
    assert collapse(leaf) == [leaf]


# ---------------------------------------------------------------- passes
def test_pack_first_fit_longest_first():
    leaves = [Node((1,) * n, 0) for n in (5, 3, 4, 2)]
    assert [[len(n.tokens) for n in row] for row in pack(leaves, 8)] == [[5, 3], [4, 2]]
    assert [[len(n.tokens) for n in row] for row in pack(leaves, 0)] == [[5], [4], [3], [2]]
    assert [[len(n.tokens) for n in row] for row in pack([Node((1,) * 9, 0)], 8)] == [[9]]


@pytest.mark.parametrize(
    ("padded", "real", "ok"), [(1000, 900, True), (1000, 899, False), (40, 8, True)]
)
def test_padding_rule(padded, real, ok):
    assert Budget.padding_ok(padded, real) is ok


def test_budget_defaults_and_sizes():
    budget = Budget(tokens=10, vocab=7, kv_per_token=2)
    # hf's largest call: logits and log-probabilities (2 x 10 x 7), the cache it builds
    # (10 x 2); the caches kept at once: half of that
    assert (budget.memory, budget.cache) == (160, 80)
    assert budget.kept(rows=3, past=4, width=5) == 3 * 9 * 2
    # copy of the parent (3 x 4), the new cache (3 x 9), 2 x 6 scored positions' logits
    assert budget.call_memory(rows=3, past=4, width=5, scored=6) == 3 * 13 * 2 + 2 * 6 * 7


def test_plan_of_an_article_with_questions_and_options():
    """RACE's shape: one article, two questions, two options each, plus a domain premise."""
    article, q1, q2, domain = (1,) * 200, (2, 3), (4, 5), (9,)
    pairs = [
        (article + q1, (6, 7)),
        (article + q1, (8, 7)),
        (article + q2, (6, 7)),
        (article + q2, (8,)),
        (domain, (6, 7)),
        (domain, (8,)),
    ]
    tops = build_tree(pairs)
    top, domain_node = tops
    first, second = top.children
    (domain_option,) = domain_node.children
    steps = list(plan(tops, Budget(tokens=1000, vocab=1, kv_per_token=0)))
    described = [
        s
        if isinstance(s, Release)
        else (s.parent, s.keep, [(r.parent, r.nodes, r.links) for r in s.rows])
        for s in steps
    ]
    assert described == [
        # The domain premise and its option: 2 tokens, laid out flat in one row (the
        # option sees the premise in the row: link 0), no pass or cache of its own.
        (None, False, [(None, (domain_node, domain_option), (-1, 0))]),
        # The article (its subtree is over FLAT_ROW tokens): kept.
        (None, True, [(None, (top,), ())]),
        # Each question with its options after it, both questions side by side in one
        # row after the article. One-token options (' 8' after q2) are scored by the
        # question's own last logits.
        (1, False, [(0, (first, *first.children, second, *second.children), (-1, 0, 0, -1, 3))]),
        Release(1),
    ]
    assert [len(n.children) for n in (first, second)] == [2, 1]
    forwarded = sum(row.length for s in steps if isinstance(s, Pass) for row in s.rows)
    assert forwarded == 200 + 2 + 1 + 1 + 2 + 1 + 1 + 1  # every token once


def test_flat_rows_only_with_packed_rows_and_within_the_budget():
    pairs = [((1, 2, 3), (4, 5)), ((1, 2, 3), (6,)), ((1, 2, 7), (8,))]
    tops = build_tree(pairs)
    roomy = Budget(tokens=100, vocab=1, kv_per_token=0)
    (only,) = [s for s in plan(tops, roomy) if isinstance(s, Pass)]
    assert only.rows[0].links == (-1, 0, 1, 0)  # (1 2) -> (3) -> (4), (7) after (1 2)
    assert only.rows[0].length == 5
    unpacked = [s for s in plan(tops, roomy, 0) if isinstance(s, Pass)]
    assert len(unpacked) == 4 and all(not r.links for s in unpacked for r in s.rows)
    # 4 positions per call: the top's subtree (5 tokens) gets a kept pass, the rest flat.
    tight = [
        s for s in plan(tops, Budget(tokens=4, vocab=1, kv_per_token=0)) if isinstance(s, Pass)
    ]
    assert [(s.keep, [r.links for r in s.rows]) for s in tight] == [
        (True, [()]),
        (False, [(-1, 0, -1)]),
    ]


def test_plan_batches_respect_tokens_padding_and_order():
    pairs = [((k,) * n, (7,)) for k, n in enumerate((10, 10, 9, 3, 2), start=1)]
    steps = list(plan(build_tree(pairs), Budget(tokens=30, vocab=1, kv_per_token=0)))
    # Leaves at the top, one per row: longest first, at most 30 positions per pass.
    assert [[row.length for row in s.rows] for s in steps] == [[10, 10, 9], [3, 2]]
    assert all(isinstance(s, Pass) and not s.keep and s.parent is None for s in steps)
    pairs = [((k,) * n, (7,)) for k, n in enumerate((40, 40, 2), start=1)]
    steps = list(plan(build_tree(pairs), Budget(tokens=1000, vocab=1, kv_per_token=0)))
    # 3 x 40 positions for 82 tokens: 38 padding, over 32 and 10 %: a pass of its own.
    assert [[row.length for row in s.rows] for s in steps] == [[40, 40], [2]]


def test_plan_collapses_nodes_whose_cache_exceeds_the_budget():
    article = tuple(range(1, 21))
    pairs = [(article + (30 + q,), (40 + o, 50)) for q in range(2) for o in range(2)]
    roomy = list(plan(build_tree(pairs), Budget(tokens=1000, vocab=1, kv_per_token=1), 0))
    tight = list(plan(build_tree(pairs), Budget(tokens=1000, vocab=1, kv_per_token=1, cache=15), 0))
    assert sum(isinstance(s, Release) for s in roomy) == 2  # article, then its questions
    assert not any(isinstance(s, Release) for s in tight)  # nothing kept: 20 > 15
    tokens = [
        sum(r.length for s in steps if isinstance(s, Pass) for r in s.rows)
        for steps in (roomy, tight)
    ]
    assert tokens == [20 + 2 + 4, 4 * 22]  # tight: each option forwards its whole input


def simulate(pairs, budget, pack_row):
    """Replays a plan: rebuilds each row's full input from its parents' and checks every
    target against the pair it scores; returns what the run would hold and forward."""
    tops = build_tree(pairs)
    kept: dict[int, list[tuple[int, ...]]] = {}  # pass id -> per row: input so far
    held, scored, peak, forwarded = 0, [], 0, 0
    sizes: dict[int, int] = {}
    for step in plan(tops, budget, pack_row):
        if isinstance(step, Release):
            held -= sizes.pop(step.id)
            del kept[step.id]
            continue
        assert step.parent is None or step.parent in kept, "parent released or never kept"
        rows = []
        for row in step.rows:
            before = () if step.parent is None else kept[step.parent][row.parent]
            assert step.keep is False or len(row.nodes) == 1
            assert pack_row or not row.links
            paths: list[tuple[int, ...]] = []
            for node, link in zip(row.nodes, row.in_row_parents(), strict=True):
                assert link < len(paths)  # an ancestor in the row comes first
                base = before if link < 0 else paths[link]
                assert node.start == len(base) and (link < 0 or node.parent is row.nodes[link])
                path = base + node.tokens
                paths.append(path)
                for offset, pair, token in node.targets:
                    context, cont = pairs[pair]
                    full = context + cont
                    position = node.start + offset
                    assert path[: position + 1] == full[: position + 1]
                    assert token == full[position + 1] and position >= len(context) - 1
                    scored.append((pair, position))
            rows.append(before + row.nodes[0].tokens)
        width = step.width
        n = len(step.rows)
        assert n == 1 or n * width <= budget.tokens
        forwarded += sum(row.length for row in step.rows)
        if step.keep:
            kept[step.id] = rows
            sizes[step.id] = budget.kept(n, step.past, width)
            held += sizes[step.id]
            assert n == 1 or held <= budget.cache
            peak = max(peak, held)
    assert not kept
    return scored, peak, forwarded, tops


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pack_row", [0, 16])
def test_random_plans_score_every_token_exactly_once(seed, pack_row):
    rng = random.Random(seed)
    stems = [tuple(rng.randrange(6) for _ in range(rng.randint(1, 25))) for _ in range(6)]
    pairs = set()
    for _ in range(60):
        context = rng.choice(stems) + tuple(rng.randrange(6) for _ in range(rng.randint(0, 6)))
        pairs.add((context, tuple(rng.randrange(6) for _ in range(rng.randint(1, 8)))))
    pairs = sorted(pairs)
    budget = Budget(
        tokens=rng.choice([8, 40, 400]), vocab=3, kv_per_token=2, cache=rng.choice([60, 5000])
    )
    scored, peak, forwarded, tops = simulate(pairs, budget, pack_row)
    expected = [
        (i, p)
        for i, (c, cont) in enumerate(pairs)
        for p in range(len(c) - 1, len(c) + len(cont) - 1)
    ]
    assert sorted(scored) == sorted(expected)
    assert forwarded <= sum(len(c) + len(cont) - 1 for c, cont in pairs)  # never above hf
    if budget.cache == 5000 and budget.tokens == 400:
        assert forwarded == tree_tokens(tops)  # room for every cache: each node once


# ---------------------------------------------------------------- answers
def test_answers_sum_tokens_restore_request_order_and_report_each_when_complete():
    requests = [
        (("p", " x"), [1, 2], [3]),
        (("q", " y z"), [9], [8, 7]),
        (("p", " x"), [1, 2], [3]),  # duplicate: answered with the first
        (("long", "!"), [1] * 10, [2]),  # answered elsewhere (hf's path)
    ]
    pairs = unique_pairs(requests, skip=[3])
    reported: list[tuple[int, tuple[float, bool]]] = []
    answers = Answers(len(requests), pairs, lambda i, a: reported.append((i, a)))
    answers.put(3, (-9.0, False))
    answers.score(1, -0.5, True)
    answers.score(0, -1.0, True)
    with pytest.raises(RuntimeError, match=r"requests \[1\] were never scored"):
        answers.in_request_order()
    answers.score(1, -1.5, False)
    assert answers.in_request_order() == [(-1.0, True), (-2.0, False), (-1.0, True), (-9.0, False)]
    # Reported as completed, every duplicate; not the one put from elsewhere.
    assert reported == [(0, (-1.0, True)), (2, (-1.0, True)), (1, (-2.0, False))]


def test_split_tops_balances_tokens_and_keeps_every_top_once():
    tops = build_tree([((k,) * n, (9,)) for k, n in enumerate((10, 7, 5, 4, 3, 1), start=1)])
    groups = split_tops(tops, 2)
    assert sorted(tree_tokens(g) for g in groups) == [15, 15]  # 10+4+1 and 7+5+3
    assert sorted(id(n) for g in groups for n in g) == sorted(id(n) for n in tops)
    assert split_tops(tops[:1], 4) == [tops[:1]]  # no empty groups


def test_divide_tops_cuts_a_short_top_over_a_large_subtree_for_two_workers():
    # Every input begins with token 1 (a prompt's shared opening): one top, one subtree.
    pairs = [((1, 2 + k) + (50 + k,) * n, (9,)) for k, n in enumerate((40, 30, 20, 10))]
    pairs.append(((1,), (7,)))  # a target on the top itself
    tops = build_tree(pairs)
    assert len(tops) == 1 and len(split_tops(tops, 2)) == 1  # one worker would do it all
    targets = sorted(t for n in walk(tops) for t in n.targets)
    divided = divide_tops(tops, 60)
    assert [len(n.tokens) for n in divided] == [1, 1]  # the top, forwarded twice
    assert [tree_tokens([n]) for n in divided] == [53, 53]  # 1 + (41 + 11), 1 + (31 + 21)
    assert sorted(t for n in walk(divided) for t in n.targets) == targets  # each once
    assert divided[0].targets == [(0, 4, 7)] and divided[1].targets == []
    assert all(child.parent is top for top in divided for child in top.children)
    assert [tree_tokens(g) for g in split_tops(divided, 2)] == [53, 53]
    # a top long beside its subtree is left whole: copying it would cost more than it saves
    long_top = build_tree([((1,) * 30 + (2,), (9,)), ((1,) * 30 + (3,), (9,))])
    assert divide_tops(long_top, 10) == long_top


# Real sizes' shapes (published configurations): logits and cache elements per position.
REAL_SHAPES = {
    "llama-3.1-8b": {"vocab": 128256, "kv_per_token": 2 * 32 * 8 * 128},
    "mistral-7b": {"vocab": 32768, "kv_per_token": 2 * 32 * 8 * 128},
    "phi-3-mini": {"vocab": 32064, "kv_per_token": 2 * 32 * 32 * 96},  # no grouped heads
}


@pytest.mark.parametrize("shape", REAL_SHAPES)
@pytest.mark.parametrize("tight", [False, True])
def test_the_cache_budget_holds_at_real_sizes_shapes(shape, tight):
    """RACE's shape at a real model's sizes: 3 articles of 600 tokens, 5 questions each,
    4 options of 2-9 tokens and the domain premise's 4 requests, batch size 4. Under the
    default budget (``PrefixHFLM._budget``'s) and under a cache budget of one and a half
    articles' caches, the caches kept at once stay within the cache budget (tight, they
    reach it), each call within the memory budget, every target is scored once and no
    more is forwarded than hf does."""
    rng = random.Random(0)
    pairs = set()
    for _ in range(3):
        article = tuple(rng.randrange(1000) for _ in range(600))
        for _ in range(5):
            question = article + tuple(rng.randrange(1000) for _ in range(12))
            for _ in range(4):
                option = tuple(rng.randrange(1000) for _ in range(rng.randint(2, 9)))
                pairs.add((question, option))
                pairs.add(((7, 8, 9), option))  # the domain premise
    pairs = sorted(pairs)
    tokens = 4 * max(len(c) + len(x) - 1 for c, x in pairs)
    one_article = 600 * REAL_SHAPES[shape]["kv_per_token"]
    cache = int(1.5 * one_article) if tight else None
    budget = Budget(tokens=tokens, **REAL_SHAPES[shape], cache=cache)
    scored, peak, forwarded, _ = simulate(pairs, budget, PACK_ROW)
    expected = [
        (i, p) for i, (c, x) in enumerate(pairs) for p in range(len(c) - 1, len(c) + len(x) - 1)
    ]
    assert sorted(scored) == sorted(expected)
    assert peak <= budget.cache
    if tight:
        assert peak >= 0.6 * budget.cache, (peak, budget.cache)  # driven to its budget
    for step in plan(build_tree(pairs), budget, PACK_ROW):
        if isinstance(step, Pass) and len(step.rows) > 1:
            scored_columns = len(set().union(*(row.scored_columns() for row in step.rows)))
            n = len(step.rows)
            assert budget.call_memory(n, step.past, step.width, n * scored_columns) <= budget.memory
    assert forwarded <= sum(len(c) + len(x) - 1 for c, x in pairs)
