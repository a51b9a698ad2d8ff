"""A quick look that is a fair sample: ``dcpmi run --quick N``, and the ``--limit`` check.

Several evaluation files are ordered by label (SST-2's first 20 test documents are all
positive, its first 500 are 93% positive, its split half and half), so ``--limit N``'s
first N documents can hold one label only, and a method that favours it looks perfect.
Two remedies:

* ``--quick N`` scores the same N documents of each task, evenly spread over its
  evaluation split (``spread_indices``; deterministic), passed to lm-eval as its
  ``--samples`` indices. It cannot be combined with ``--limit`` or ``--samples``.
* With ``--limit``, a task whose prefix has gold labels far from its split's
  (``skewed_prefix``: total variation distance over ``MAX_LABEL_DISTANCE``, or a label of
  the split missing from a prefix long enough to hold every label) gets one warning that
  names ``--quick``, and its significance marks are left out of the printed table.

A document's gold label is what the task's ``doc_to_target`` gives for it (the option
index for the plugin's tasks).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

QUICK_OPTION = "--quick"
# Beyond this total variation distance between the label shares of a --limit prefix and of
# the whole split, the prefix is not a fair look (0.2: e.g. 70% of one label where the
# split has 50%).
MAX_LABEL_DISTANCE = 0.2


def spread_indices(total: int, count: int) -> list[int]:
    """``count`` document indices evenly spread over ``0..total-1``: the first, the last and
    equal steps between (``round(i * (total - 1) / (count - 1))``); one document: the
    middle one; every document when ``count >= total``."""
    if count >= total:
        return list(range(total))
    if count == 1:
        return [(total - 1) // 2]
    steps = count - 1
    # round-half-up in integers: (2 * i * (total - 1) + steps) // (2 * steps)
    return [(2 * i * (total - 1) + steps) // (2 * steps) for i in range(count)]


def quick_samples(sizes: Mapping[str, int], count: int) -> dict[str, list[int]]:
    """lm-eval's ``--samples`` for ``--quick count``: each task (``sizes``: task ->
    documents in its evaluation split) with its evenly spread indices."""
    return {name: spread_indices(total, count) for name, total in sizes.items()}


def gold_labels(task: Any) -> list[Hashable]:
    """The gold label of every document of ``task``'s evaluation split, in order: its
    ``doc_to_target`` (lists as tuples, so that they can be counted)."""
    labels: list[Hashable] = []
    for doc in task.eval_docs:
        target = task.doc_to_target(doc)
        labels.append(tuple(target) if isinstance(target, list) else target)
    return labels


def prefix_size(total: int, limit: float) -> int:
    """How many documents lm-eval's ``--limit`` takes (``evaluator_utils.get_sample_size``:
    below 1, a share of the split, rounded up)."""
    return min(total, int(math.ceil(total * limit)) if limit < 1.0 else int(limit))


def label_distance(prefix: Sequence[Hashable], split: Sequence[Hashable]) -> float:
    """Total variation distance between the label shares of ``prefix`` and ``split``."""
    if not prefix or not split:
        return 0.0
    ours, theirs = Counter(prefix), Counter(split)
    return 0.5 * sum(
        abs(ours[label] / len(prefix) - theirs[label] / len(split)) for label in theirs | ours
    )


def skewed_prefix(labels: Sequence[Hashable], size: int) -> str | None:
    """Why the first ``size`` documents (of gold ``labels``) are not a fair look, or None:
    their label shares are far from the split's, or a label is missing although ``size``
    could hold every label. A prefix that is the whole split is fair."""
    if size >= len(labels) or size < 1:
        return None
    prefix = labels[:size]
    split_counts = Counter(labels)
    missing = [label for label in split_counts if label not in set(prefix)]
    far = label_distance(prefix, labels) > MAX_LABEL_DISTANCE
    if not far and not (missing and size >= len(split_counts)):
        return None
    return f"labels of the first {size} {_counts(prefix)}, of all {len(labels)} {_counts(labels)}"


def _counts(labels: Sequence[Hashable]) -> str:
    """``{0: 909, 1: 912}``: each label's count, labels in sorted order."""
    counts = Counter(labels)
    ordered = sorted(counts, key=_label_order)
    return "{" + ", ".join(f"{label!r}: {counts[label]}" for label in ordered) + "}"


def _label_order(label: Hashable) -> tuple[bool, float, str]:
    """Numbers first, in numeric order (2 before 10), then the rest by their text."""
    numeric = isinstance(label, (int, float)) and not isinstance(label, bool)
    return (not numeric, float(label) if numeric else 0.0, repr(label))  # type: ignore[arg-type]


def skewed_tasks(tasks: Mapping[str, Any], limit: float) -> dict[str, str]:
    """The tasks whose ``--limit`` prefix is not a fair look (``skewed_prefix``): task ->
    why."""
    found: dict[str, str] = {}
    for name, task in tasks.items():
        labels = gold_labels(task)
        why = skewed_prefix(labels, prefix_size(len(labels), limit))
        if why is not None:
            found[name] = why
    return found


def warn_skewed(skewed: Mapping[str, str], limit: float) -> None:
    """One warning line for every task ``skewed_tasks`` found, naming ``--quick``."""
    if not skewed:
        return
    shown = "; ".join(f"{name}: {why}" for name, why in list(skewed.items())[:3])
    more = f"; and {len(skewed) - 3} more task(s)" if len(skewed) > 3 else ""
    count = int(limit) if limit >= 1 else None
    quick = f"{QUICK_OPTION} {count}" if count else f"{QUICK_OPTION} N"
    print(
        f"dcpmi: warning: --limit takes each task's first documents, and their gold labels "
        f"are far from the split's ({shown}{more}); their accuracies are not a fair look and "
        f"their significance marks are left out. Use {quick} for documents evenly spread "
        "over each split.",
        file=sys.stderr,
    )
