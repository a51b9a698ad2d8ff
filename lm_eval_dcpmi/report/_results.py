"""What a report is made of: the DC-PMI rows of one lm-eval results dict.

``run_from_dict`` turns a results file's JSON (or what ``lm_eval.simple_evaluate``
returns) into a ``RunResults``: a ``TaskRow`` per DC-PMI task and group, the study groups
(``_paper.STUDIES``) found in it, and, where samples were logged, each task's per-document
correctness under every method (for intervals and tests, see ``_stats``).
Nothing here imports lm-eval or torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.rules import (
    HEADLINE,
    MASS,
    REQUIRED,
    TIED_DOMAIN,
    TRUNCATED,
    metric_named,
)
from lm_eval_dcpmi.task import derived_rule

# Column order of the tables and their labels (Unc, LM, Avg, Char, DC-PMI): the rules table's.
METHODS: tuple[str, ...] = looks.METHODS
LABELS: dict[str, str] = looks.LABELS
DCPMI = HEADLINE
# A results entry is a DC-PMI task's when it has the methods of the first release; those
# added later may be missing from older files (the column shows MISSING).
NA = "n/a"  # computed, but not a number (Avg without a tokenizer)
MISSING = "–"  # not in the results file at all


class ReportError(DCPMIError):
    """Input that cannot be reported on; the message (one line) names the file and why."""


@dataclass
class TaskRow:
    """One row of a model's table: a task, or a group's aggregated (mean) row."""

    task: str
    scores: dict[str, float]  # method -> accuracy in [0, 1]; NaN: not computed; absent: missing
    n: int | None = None  # documents scored
    n_total: int | None = None  # documents in the task's evaluation split
    truncated: float | None = None  # requests longer than the model's context (NaN: unknown)
    # documents whose domain requests are their conditional requests (DC-PMI ties there);
    # None: the results file does not count them (written before the plugin did, or a group)
    tied_domain: float | None = None
    is_group: bool = False
    # method -> per-document 1.0/0.0 (NaN where not computed), and measure -> per-document
    # number, in doc_id order; only when the run logged samples (--log_samples).
    per_doc: dict[str, list[float]] | None = None
    # the accuracies only some tasks have (CC, BC, PMI under other priors): name -> value
    extra: dict[str, float] = field(default_factory=dict)
    # the measures the results report (PMA: rules.MEASURES), name -> the task's mean;
    # absent from files written before the plugin reported them
    measures: dict[str, float] = field(default_factory=dict)
    # the documents (doc ids) whose logged PMA is NaN: the surface form competition section
    # leaves them out and says so (a warning names them too)
    unmeasured: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.task} (mean)" if self.is_group else self.task

    def shown(self, method: str) -> float:
        """The accuracy as displayed: percent rounded to one decimal (NaN when absent)."""
        return percent(self.scores.get(method, math.nan))

    @property
    def best(self) -> tuple[str, ...]:
        """Methods with the highest displayed accuracy (several on a tie; NaN never wins)."""
        return best_of({m: self.shown(m) for m in METHODS})

    @property
    def limited(self) -> bool:
        return self.n is not None and self.n_total is not None and self.n < self.n_total


@dataclass
class Study:
    """A study group (``_paper.STUDIES``): variants of one task, reported as a spread."""

    group: str
    description: str
    members: list[TaskRow]  # the group's tasks present in the run, in the group's order


@dataclass
class RunResults:
    """The DC-PMI rows of one lm-eval results file (one model, one run)."""

    model: str  # display name, unique among the runs of one report
    rows: list[TaskRow]  # in report order: tasks (paper order), then group rows
    source: Path | None = None
    limit: float | None = None  # lm-eval's --limit, when the run used one
    n_shot: dict[str, Any] = field(default_factory=dict)
    studies: list[Study] = field(default_factory=list)
    # task -> its samples file (results files written with --log_samples)
    samples_files: dict[str, Path] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the results dict
    # The model's name before ``loading`` made run names unique ("[<date>]" appended):
    # the summary pools the runs of one model under it.
    model_name: str = ""
    # How `dcpmi run` chose the documents, which a results file does not record: --quick's
    # N per task, evenly spread over each split; and the tasks whose --limit prefix has gold
    # labels far from the split's (task -> why), shown without significance marks.
    quick: int | None = None
    unfair_prefix: dict[str, str] = field(default_factory=dict)

    def drop_significance(self, unfair: Mapping[str, str]) -> None:
        """Leave out intervals and tests (the per-document results) of the ``unfair``
        tasks (task -> why): their documents are no fair sample of the split."""
        self.unfair_prefix.update(unfair)
        for row in self.rows:
            if row.task in unfair:
                row.per_doc = None

    @property
    def main_rows(self) -> list[TaskRow]:
        """The rows of the main table: all but study groups and their members (those are
        reported per study); a paper task that is also a study member stays."""
        hidden = {s.group for s in self.studies}
        hidden |= {m.task for s in self.studies for m in s.members}
        hidden -= set(paper.paper_order())
        return [row for row in self.rows if row.task not in hidden]

    @property
    def tasks(self) -> list[TaskRow]:
        """The main table's task rows, without group rows."""
        return [row for row in self.main_rows if not row.is_group]

    @property
    def has_samples(self) -> bool:
        return any(row.per_doc for row in self.rows)

    @property
    def derived_premises(self) -> dict[str, str]:
        """Task -> the rule that derived its domain premise, for the tasks whose results
        record one (``task._premise_digest.DERIVED_KEY``: no premise was written)."""
        configs = _mapping(self.data, "configs")
        found = {}
        for row in self.rows:
            config = configs.get(row.task)
            metadata = config.get("metadata") if isinstance(config, Mapping) else None
            rule = derived_rule(metadata)
            if rule is not None and not row.is_group:
                found[row.task] = rule
        return found

    @property
    def limited(self) -> bool:
        """True when the run scored fewer documents than the tasks hold (``--limit`` or
        ``--samples``); a recorded ``--limit`` that left every task whole is not (it counts
        only where a task's document counts are unknown)."""
        leaves = [row for row in self.rows if not row.is_group]
        if any(row.limited for row in leaves):
            return True
        return self.limit is not None and any(r.n is None or r.n_total is None for r in leaves)


def percent(value: float | None) -> float:
    if value is None or math.isnan(value):
        return math.nan
    return round(100.0 * value, 1)


def best_of(shown: Mapping[str, float]) -> tuple[str, ...]:
    """The keys of the highest non-NaN value, in ``METHODS`` order (several on a tie)."""
    valid = [v for v in shown.values() if not math.isnan(v)]
    if not valid:
        return ()
    top = max(valid)
    return tuple(m for m in METHODS if m in shown and shown[m] == top)


def number(value: Any) -> float:
    """A metric value as float; anything that is not a number ("N/A", None) is NaN."""
    try:
        return float(value)  # also numpy scalars, numeric strings
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float
        return math.nan


def metric(entry: Mapping[str, Any], name: str) -> float | None:
    """``entry["<name>,<filter>"]`` (filter ``none`` first); None when the metric is absent."""
    key = f"{name},none"
    if key in entry:
        return number(entry[key])
    for key, value in entry.items():
        if isinstance(key, str) and "," in key and key.partition(",")[0] == name:
            return number(value)
    return None


def _int_or_none(value: Any) -> int | None:
    """A count as recorded; None for what is no finite number (the integrity checks of
    ``loading`` refuse a count that is not one, naming it)."""
    value = number(value)
    return int(value) if math.isfinite(value) else None


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def model_label(data: Mapping[str, Any]) -> str:
    """A short display name for the model of a results dict.

    The GGUF file name (without ``.gguf``) when the run loaded one; else lm-eval's
    ``model_name`` or the ``pretrained=`` model argument, with a local folder shortened
    to its last component (Hub ids such as ``EleutherAI/pythia-160m`` stay whole).
    """
    from lm_eval_dcpmi._harness import recorded_model_args

    config = _mapping(data, "config")
    args = recorded_model_args(data)
    gguf = args.get("gguf_file")
    if isinstance(gguf, str) and gguf:
        return re.sub(r"\.gguf$", "", Path(gguf).name)
    name = data.get("model_name") or args.get("pretrained") or args.get("model")
    if not isinstance(name, str) or not name:
        return str(config.get("model") or "model")
    if name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1:
        return Path(name.rstrip("/\\")).name or name
    return name


def _task_sort_key(name: str) -> tuple[int, str]:
    order = paper.paper_order()
    return (order.index(name) if name in order else len(order), name)


def _row(name: str, entry: Mapping[str, Any], is_group: bool) -> TaskRow | None:
    """The row of one results entry; None when it is not a DC-PMI task or group."""
    values = {m: metric(entry, m) for m in METHODS}
    if any(values[m] is None for m in REQUIRED):
        return None
    extra, measures = {}, {}
    for key in entry:
        name_, _, _filter = str(key).partition(",")
        row_metric = None if name_.endswith("_stderr") else metric_named(name_)
        if name_ not in METHODS and row_metric is not None and row_metric.kind == "accuracy":
            extra[name_] = metric(entry, name_)
        elif row_metric is not None and row_metric.kind == "measure":
            measures[name_] = metric(entry, name_)
    return TaskRow(
        task=name,
        scores={m: v for m, v in values.items() if v is not None},
        truncated=metric(entry, TRUNCATED),
        tied_domain=metric(entry, TIED_DOMAIN),
        is_group=is_group,
        extra={k: v for k, v in extra.items() if v is not None},
        measures={k: v for k, v in measures.items() if v is not None},
    )


def _check_accuracies(row: TaskRow, where: str) -> None:
    """An accuracy is a number from 0 to 1 (NaN: not computed); anything else would be shown
    as a percentage no run can make (``DC-PMI 150.0``)."""
    for metric_name, value in {**row.scores, **row.extra}.items():
        if not math.isnan(value) and not 0 <= value <= 1:
            raise ReportError(
                f"{where}: {row.task}'s {metric_name} is {value!r}, not an accuracy (a number "
                "from 0 to 1); the results file is damaged or edited (dcpmi verify says more)"
            )


def per_document(samples: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each method's per-document 1.0/0.0 (NaN: not computed) and each measure's number
    (PMA) from a task's logged samples, in doc_id order; those the samples do not hold are
    left out."""
    ordered = sorted(
        (s for s in samples if s.get("filter", "none") == "none"),
        key=lambda s: int(s["doc_id"]),
    )
    found = {
        m: [number(s[m]) for s in ordered]
        for m in METHODS
        if ordered and all(m in s for s in ordered)
    }
    others = {str(k) for s in ordered[:1] for k in s if str(k) not in METHODS}
    for name in sorted(others):
        row_metric = None if name.endswith("_stderr") else metric_named(name)
        if row_metric is None or row_metric.kind == "count":
            continue
        if not all(name in s for s in ordered):
            continue
        if row_metric.corpus is not None:  # items: decided over the task
            found[name] = row_metric.corpus.decisions([_item(s[name]) for s in ordered])
        else:
            found[name] = [number(s[name]) for s in ordered]
    return found


def unmeasured(samples: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """The doc ids of ``samples`` whose logged PMA (``MASS``) is NaN, in order."""
    return tuple(
        sorted(
            int(s["doc_id"])
            for s in samples
            if s.get("filter", "none") == "none" and MASS in s and math.isnan(number(s[MASS]))
        )
    )


def _item(value: Any) -> list[float]:
    """A corpus rule's item as logged: a list, or its JSON text."""
    if isinstance(value, str):
        value = json.loads(value)
    return [number(x) for x in value]


def run_from_dict(
    data: Any,
    source: str | PathLike | None = None,
    samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> RunResults:
    """The DC-PMI rows of an lm-eval results dict (a results file's JSON, or what
    ``lm_eval.simple_evaluate`` returns). ``samples`` (task -> logged samples) defaults
    to ``data["samples"]``, which ``simple_evaluate(log_samples=True)`` fills. Raises
    ``ReportError`` when ``data`` is not a results dict or holds no DC-PMI task (one with
    acc, acc_avg, acc_unc and acc_dcpmi).
    """
    where = str(source) if source is not None else "results"
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), Mapping):
        raise ReportError(
            f"{where}: not an lm-eval results file (no 'results' object; expected the "
            "results_<date>.json that `lm_eval ... --output_path DIR` writes)"
        )
    results: Mapping[str, Any] = data["results"]
    subtasks = _mapping(data, "group_subtasks")
    groups = set(subtasks) | set(data.get("groups") or {})
    n_samples = _mapping(data, "n-samples")
    samples = _mapping(data, "samples") if samples is None else samples

    rows: list[TaskRow] = []
    for name, entry in results.items():
        row = _row(str(name), entry, name in groups) if isinstance(entry, Mapping) else None
        if row is None:
            continue
        _check_accuracies(row, where)
        counts = n_samples.get(name)
        if isinstance(counts, Mapping):
            row.n = _int_or_none(counts.get("effective"))
            row.n_total = _int_or_none(counts.get("original"))
        if row.n is None:
            row.n = _int_or_none(entry.get("sample_len"))
        if samples.get(name):
            row.per_doc = per_document(samples[name]) or None
            row.unmeasured = unmeasured(samples[name])
        rows.append(row)
    if not rows:
        names = ", ".join(sorted(str(k) for k in results)) or "none"
        raise ReportError(
            f"{where}: holds no DC-PMI task (tasks: {names}); a DC-PMI task reports "
            f"{', '.join(REQUIRED)} - evaluate the dcpmi_* tasks (group `dcpmi`)"
        )

    task_rows = sorted((r for r in rows if not r.is_group), key=lambda r: _task_sort_key(r.task))
    group_rows = sorted((r for r in rows if r.is_group), key=lambda r: r.task)
    by_name = {row.task: row for row in task_rows}
    for group in group_rows:
        leaves = [by_name[t] for t in paper.study_members(group.task, subtasks) if t in by_name]
        if leaves and all(r.n is not None and r.n_total is not None for r in leaves):
            group.n = sum(r.n for r in leaves)  # type: ignore[misc]
            group.n_total = sum(r.n_total for r in leaves)  # type: ignore[misc]
    studies = [
        Study(group, description, members)
        for group, description in paper.STUDIES.items()
        if (members := [by_name[t] for t in paper.study_members(group, subtasks) if t in by_name])
    ]

    limit = number(_mapping(data, "config").get("limit"))
    shots = _mapping(data, "n-shot")
    ordered = task_rows + group_rows
    label = model_label(data)
    return RunResults(
        model=label,
        rows=ordered,
        source=Path(source) if source is not None else None,
        limit=None if math.isnan(limit) else limit,
        n_shot={r.task: shots[r.task] for r in ordered if r.task in shots},
        studies=studies,
        data=data,
        model_name=label,
    )
