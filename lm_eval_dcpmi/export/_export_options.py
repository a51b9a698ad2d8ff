"""What every export format shares: the user's options (``ExportOptions``), a metric in
words, and the small facts of a submission the formats all state."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval_dcpmi.export._datasets import BENCHMARKS, Benchmark
from lm_eval_dcpmi.report import metric_look
from lm_eval_dcpmi.rules import HEADLINE, metric_named
from lm_eval_dcpmi.verification import Submission, TaskEntry

FORMATS = ("eee", "hf", "model-index")
EEE_SCHEMA_VERSION = "0.3.0"


@dataclass
class ExportOptions:
    """What the user chose (``dcpmi export``'s options)."""

    format: str
    out: Path
    headline: str = HEADLINE
    allow_partial: bool = False
    allow_other_version: bool = False
    instances: bool | None = None  # None: when the samples hold loglikelihoods
    datasets: dict[str, Benchmark] = field(default_factory=dict)  # --dataset, beside BENCHMARKS
    organization: str = "unknown"
    relationship: str = "third_party"
    source_url: str | None = None
    tokenizer: str | None = None


def describe(metric: str) -> str:
    """A metric in words: e.g. DC-PMI's rule, with its paper."""
    row = metric_named(metric)
    rule = row.rule if row is not None else metric
    return f"accuracy, option with the highest {rule} ({metric_look(metric).description})"


def documents_text(submission: Submission, names: Sequence[str]) -> str:
    shown = [f"{n} {submission.tasks[n].n} of {submission.tasks[n].n_total}" for n in names[:4]]
    more = f", and {len(names) - 4} more" if len(names) > 4 else ""
    return ", ".join(shown) + more + " documents"


def tasks_of(submission: Submission) -> list[TaskEntry]:
    return [t for t in submission.tasks.values() if not t.is_group]


def benchmark_of(task: str, options: ExportOptions) -> Benchmark | None:
    return options.datasets.get(task) or BENCHMARKS.get(task)


def run_date(submission: Submission) -> dt.datetime | None:
    stamp = submission.data.get("date")
    try:
        return dt.datetime.fromtimestamp(float(stamp), tz=dt.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def stable_uuid(*parts: str) -> str:
    """A version-4-shaped UUID from ``parts``: the same submission gives the same name."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else value
