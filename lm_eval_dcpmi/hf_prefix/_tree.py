"""The prefix tree of a set of loglikelihood requests: every shared token prefix once.

Pure, no torch. A request ``(context, continuation)`` asks for
``sum_t log P(continuation[t] | context + continuation[:t])``; the model reads its input
``context + continuation[:-1]`` and the logits at positions ``len(context) - 1`` onwards
score the continuation. Two requests whose inputs share a prefix (one RACE article under
several questions and options, one domain premise under every option of a task, one
block of few-shot examples under every document) need that prefix's key/value cache
once. ``build_tree`` lays all inputs into a radix tree: each ``Node`` holds a run of
tokens that every input below it shares, and the *targets* (position, pair, next token)
whose logits it produces. ``_schedule`` plans forward passes over the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Tokens = tuple[int, ...]
# (offset in the node's tokens, pair index, next token): the logits at that offset score
# that token for that pair.
Target = tuple[int, int, int]


@dataclass(eq=False)
class Node:
    """A run of tokens at absolute positions ``start``..``end - 1`` of every input below it."""

    tokens: Tokens
    start: int
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    def __repr__(self) -> str:  # the default would print the whole subtree
        return f"Node({self.tokens!r}, start={self.start}, children={len(self.children)})"


def common_prefix(a: Tokens, b: Tokens) -> int:
    """Length of the longest common prefix (tuple slices compare in C; bisection)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def build_tree(pairs: Sequence[tuple[Tokens, Tokens]]) -> list[Node]:
    """The radix tree of the pairs' inputs; returns the root's children (the tree's tops).

    Every ``(context, continuation)`` needs a token in each. Each position a pair scores
    is a target of exactly one node; identical pairs should be merged by the caller.
    """
    inputs = []
    for i, (context, continuation) in enumerate(pairs):
        if not context or not continuation:
            raise ValueError(f"pair {i}: context and continuation need a token each")
        inputs.append(tuple(context) + tuple(continuation[:-1]))
    root = Node((), 0)
    path = [root]  # root .. the node where the previous input (in sorted order) ends
    previous: Tokens = ()
    ends: list[Node] = [root] * len(pairs)
    for i in sorted(range(len(pairs)), key=inputs.__getitem__):
        tokens = inputs[i]
        shared = common_prefix(previous, tokens)
        while len(path) > 1 and path[-1].start >= shared:
            path.pop()
        top = path[-1]
        if top.end > shared:  # the new input leaves `top` midway: split it there
            path[-1] = _split(top, shared)
        if len(tokens) > shared:
            node = Node(tokens[shared:], shared, parent=path[-1])
            path[-1].children.append(node)
            path.append(node)
        ends[i] = path[-1]
        previous = tokens
    for i, (context, continuation) in enumerate(pairs):
        _add_targets(ends[i], i, tuple(context) + tuple(continuation), len(context) - 1)
    return root.children


def _split(node: Node, at: int) -> Node:
    """Cut ``node`` at absolute position ``at``: a new node takes its head and its place in
    the tree; ``node`` keeps its tail, children and identity (inputs ending there stay)."""
    head = Node(node.tokens[: at - node.start], node.start, parent=node.parent)
    siblings = node.parent.children  # type: ignore[union-attr]  # never the root
    siblings[siblings.index(node)] = head
    node.tokens, node.start, node.parent = node.tokens[at - node.start :], at, head
    head.children.append(node)
    return head


def _add_targets(end: Node, pair: int, sequence: Tokens, first: int) -> None:
    """Targets of positions ``first``..``len(sequence) - 2`` on the path ending at ``end``."""
    node: Node | None = end
    while node is not None and node.end > first:
        for position in range(max(node.start, first), node.end):
            node.targets.append((position - node.start, pair, sequence[position + 1]))
        node = node.parent


def walk(tops: Iterable[Node]) -> Iterable[Node]:
    """Every node of the tree, depth first."""
    stack = list(tops)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def tree_tokens(tops: Iterable[Node]) -> int:
    """Token positions the tree forwards (each node's tokens once)."""
    return sum(len(node.tokens) for node in walk(tops))


def collapse(node: Node) -> list[Node]:
    """``node``'s children, each with ``node``'s tokens in front (in ``node``'s place):
    the subtree without ``node``'s cache, at the price of forwarding its tokens once per
    child. ``node``'s own targets go with the first child. A leaf is returned as it is."""
    if not node.children:
        return [node]
    merged = []
    for number, child in enumerate(node.children):
        shift = len(node.tokens)
        targets = [(offset + shift, pair, token) for offset, pair, token in child.targets]
        if number == 0:
            targets = [*node.targets, *targets]
        new = Node(node.tokens + child.tokens, node.start, node.parent, child.children, targets)
        for grandchild in child.children:
            grandchild.parent = new
        merged.append(new)
    return merged


def divide_tops(tops: Sequence[Node], largest: int) -> list[Node]:
    """The tops, each top whose subtree has more than ``largest`` tokens cut into copies
    that share its children out (its own targets stay with the first copy).

    Prompts that all begin alike (CB's, TREC's) make one top over the whole tree, and
    ``split_tops`` cannot give two workers one subtree: one core idles. Each copy forwards
    the top's tokens again, so a top is cut only when short beside its subtree (at most
    1/32 of it per copy); the nodes below are shared out, not copied.
    """
    out: list[Node] = []
    for top in tops:
        size = tree_tokens([top])
        copies = min(len(top.children), -(-size // max(1, largest)))
        if copies < 2 or len(top.tokens) * 32 * copies > size:
            out.append(top)
            continue
        shares: list[list[Node]] = [[] for _ in range(copies)]
        loads = [0] * copies
        children = sorted(((tree_tokens([c]), c) for c in top.children), key=lambda sc: -sc[0])
        for child_size, child in children:
            lightest = loads.index(min(loads))
            shares[lightest].append(child)
            loads[lightest] += child_size
        for number, share in enumerate(shares):
            targets = top.targets if number == 0 else []
            copy = Node(top.tokens, top.start, top.parent, share, targets)
            for child in share:
                child.parent = copy
            out.append(copy)
    return out


def split_tops(tops: Sequence[Node], parts: int) -> list[list[Node]]:
    """The tops in ``parts`` groups of about equal tokens (largest subtree first, each to
    the lightest group): subtrees that share nothing, for as many workers."""
    groups: list[list[Node]] = [[] for _ in range(max(1, parts))]
    loads = [0] * len(groups)
    for size, node in sorted(((tree_tokens([t]), t) for t in tops), key=lambda st: -st[0]):
        lightest = loads.index(min(loads))
        groups[lightest].append(node)
        loads[lightest] += size
    return [group for group in groups if group]
