"""What ``dcpmi report`` requires of a results file and its samples beyond their shapes
(``_samples.shape_problem``), so that no cell is left blank and no rule fails on them:
every value of the metric table a number (``check_numbers``: a count whole, a measure 0 or
more), every task's document counts whole numbers, and every samples line logging the
same per-document metrics, each corpus rule's item as long as the others'
(``same_metrics``). What does not hold is a ``ReportError`` naming the file. The split's size
(``n-samples`` original) is shown as recorded: only the data can tell it (``dcpmi verify``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from lm_eval_dcpmi.report._results import ReportError, number
from lm_eval_dcpmi.report._samples import item_of
from lm_eval_dcpmi.rules import listed_metrics, metric_named


class SamplesError(ReportError):
    """The samples files beside a DC-PMI results file are unreadable or do not match it."""


def check_numbers(
    task: str,
    entry: Mapping[str, Any],
    n_samples: Mapping[str, Any],
    where: str,
    config: Any = None,
) -> None:
    """Each value of the metric table is a number (NaN: not computed), each metric of it that
    the task's recorded ``config`` lists is there, and the task's document counts, where
    recorded, are whole numbers: else a cell would be left blank."""
    wrong = [
        (f"{task}'s {k}", v, "a value of its metric (a number; a count whole, 0 or more)")
        for k, v in entry.items()
        if not _number_of(k, v)
    ]
    reported = {str(k).partition(",")[0] for k in entry}
    missing = sorted(m for m in listed_metrics(config) if metric_named(m) and m not in reported)
    if missing:
        raise ReportError(
            f"{where}: {task}'s {missing[0]} is not reported, though the task's metric_list "
            "names it (lm-eval writes each); the results file is damaged or edited (dcpmi "
            "verify says more)"
        )
    counts = n_samples.get(task, {})
    if not isinstance(counts, Mapping):
        wrong.append((f"n-samples {task}", counts, "its counts (original, effective)"))
    for key in ("effective", "original") if isinstance(counts, Mapping) and counts else ():
        value = counts.get(key)
        if isinstance(value, bool) or not (number(value) >= 0 and number(value).is_integer()):
            wrong.append((f"n-samples {task} {key}", value, "a count"))
    if isinstance(counts, Mapping) and counts and not wrong:
        if number(counts["effective"]) > number(counts["original"]):
            wrong.append((f"n-samples {task} effective", counts["effective"], "within original"))
    for what, value, kind in wrong[:1]:
        text = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ReportError(
            f"{where}: {what} is {text}, not {kind}; the results file is damaged or edited "
            "(dcpmi verify says more)"
        )


def _number_of(key: Any, value: Any) -> bool:
    """Whether ``value`` is a number (a count's whole, a measure's 0 or more; NaN: not
    computed), or ``key`` names no value of the metric table."""
    name = str(key).partition(",")[0]
    row = None if name.endswith("_stderr") else metric_named(name)
    if row is None:
        return True
    if isinstance(value, str):
        return not math.isnan(number(value)) or value.lower() == "nan"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    x = number(value)
    return (
        math.isnan(x)
        or row.kind == "accuracy"
        or (x >= 0 and (row.kind != "count" or x.is_integer()))
    )


def same_metrics(samples: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Every line logs the same per-document metrics (lm-eval logs every metric of the
    task on every line), each corpus rule's item as long as the others' (the rule decides
    them together): else a metric would be left out, or the rule fail."""
    logged = [{str(k) for k in s if metric_named(str(k))} for s in samples]
    every = set().union(*logged)
    for number_, (sample, names) in enumerate(zip(samples, logged, strict=True), start=1):
        if every - names:  # before the items' sizes are read off the first line
            _unlike(path, sample, number_, f"logs no {sorted(every - names)[0]}")
    items = [m for m in every if (row := metric_named(m)) and row.corpus]
    sizes = {m: len(item_of(samples[0][m])) for m in items}
    for number_, sample in enumerate(samples, start=1):
        odd = [m for m in items if len(item_of(sample[m])) != sizes[m]]
        if odd:
            _unlike(path, sample, number_, f"logs an item of another size for {odd[0]}")


def _unlike(path: Path, sample: Mapping[str, Any], number_: int, what: str) -> NoReturn:
    raise SamplesError(
        f"{path}: doc {sample.get('doc_id')!r} (sample {number_}) {what}, unlike the other "
        "documents; the samples file was edited or is not lm-eval's. Use the samples files of "
        "the run as written."
    )
