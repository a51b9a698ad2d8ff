"""What a results file says that no run can have made: refused by ``dcpmi verify``,
``dcpmi export`` and ``dcpmi merge`` before anything is recomputed.

* ``model_findings``: lm-eval's ``dummy`` model (random loglikelihoods) under a real
  model's name; an embedded model whose recorded file digest is not the installed file's.
* ``value_findings``: a value of a DC-PMI task that is not finite or not in its metric's
  range (an accuracy of ``Infinity``, ``NaN`` or 1.5; a negative or fractional count), or
  reported under a filter other than lm-eval's multiple-choice one, ``none``, or for a
  metric neither the plugin's table nor the task's ``metric_list`` names.
"""

from __future__ import annotations

import math
from typing import Any

from lm_eval_dcpmi._identity import EMBEDDED_ID, RANDOM_MODELS, installed_embedded_sha256
from lm_eval_dcpmi.rules import Metric, listed_metrics, metric_named
from lm_eval_dcpmi.verification._recompute import Finding, logged_number
from lm_eval_dcpmi.verification._submission import Submission


def model_findings(submission: Submission) -> list[Finding]:
    """A results file whose model cannot have made its numbers under the name it gives."""
    found = []
    where = str(submission.path)
    config = submission.run_config
    model_type = config.get("model")
    if model_type in RANDOM_MODELS:
        found.append(
            Finding(
                where,
                f"config.model is {model_type!r}, lm-eval's model of random loglikelihoods, so "
                f"no model made these numbers (the results name {submission.model.name}); "
                "score the model itself",
            )
        )
    model = submission.model
    if model.id == EMBEDDED_ID and model.file_sha256:
        installed = installed_embedded_sha256()
        if installed is not None and installed != model.file_sha256:
            found.append(
                Finding(
                    where,
                    f"records the embedded model's file {model.file} with sha256 "
                    f"{model.file_sha256[:16]}..., but the installed {model.package or 'file'} "
                    f"has {installed[:16]}...: another file was scored",
                )
            )
    return found


def _range_problem(metric: Metric, stderr: bool, value: Any) -> str | None:
    if stderr:
        if value == "N/A":
            return None
        if metric.kind == "count" or metric.corpus is not None:
            # lm-eval gives no standard error of a sum or of a corpus rule's aggregation
            return 'is a standard error, but lm-eval writes "N/A" for this metric'
        x = logged_number(value)
        return None if math.isfinite(x) and x >= 0 else "is not a standard error"
    x = logged_number(value)
    if not math.isfinite(x):
        return "is not a finite number"
    if metric.kind == "accuracy" and not 0 <= x <= 1:
        return "is not an accuracy (a number from 0 to 1)"
    if metric.kind == "count" and (x < 0 or x != int(x)):
        return "is not a count (a whole number, 0 or more)"
    if metric.kind == "measure" and x < 0:
        return "is not a probability mass (a number, 0 or more)"
    return None


def value_findings(submission: Submission) -> list[Finding]:
    """Every value of the DC-PMI tasks' results entries that is not finite or not in its
    metric's range (a NaN or infinite accuracy is never passed on) or reported under a
    filter other than ``none`` or for a metric no table or ``metric_list`` names (no run
    writes either, nothing would check it), and every task's
    document counts (``n-samples``) that are not two whole numbers, the scored within the
    split's."""
    found = []
    counts, shots = submission.data.get("n-samples"), submission.data.get("n-shot")
    for name, task in submission.tasks.items():
        if task.is_group:
            continue
        shot = shots.get(name) if isinstance(shots, dict) else None
        if shot is not None and (not isinstance(shot, int) or isinstance(shot, bool) or shot < 0):
            found.append(
                Finding(
                    f"{submission.path} ({name})",
                    f"its n-shot {_shown(shot)} is not a number of few-shot examples",
                )
            )
        recorded = counts.get(name) if isinstance(counts, dict) else None
        kept = recorded if isinstance(recorded, dict) else {}
        values = [kept.get(k) for k in ("effective", "original")]
        if not (
            isinstance(recorded, dict)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
            and values[0] <= values[1]
        ):
            found.append(
                Finding(
                    f"{submission.path} ({name})",
                    f"its n-samples entry {_shown(recorded)} is not the documents scored and "
                    "in the split (effective and original, whole numbers) that lm-eval records",
                )
            )
    for name, task in submission.tasks.items():
        entry = submission.data["results"].get(name) or {}
        # a task's own metrics (lm-eval's, e.g. brier_score) are the ones its config lists;
        # a group's, those its members list
        members = [submission.tasks[m] for m in task.subtasks if m in submission.tasks]
        own_metrics = frozenset().union(
            *(listed_metrics(t.config) for t in (members if task.is_group else [task]))
        )
        for key, value in entry.items():
            metric_name, comma, filter_name = str(key).partition(",")
            if comma and filter_name != "none":
                # A reader of the file takes it for the metric's value, but nothing checks it.
                found.append(
                    Finding(
                        f"{submission.path} ({name}, {key})",
                        f"{_shown(value)} is reported under the filter {filter_name!r}; a DC-PMI "
                        "task has lm-eval's one multiple-choice filter, none, so no run wrote it",
                    )
                )
                continue
            stderr = metric_name.endswith("_stderr")
            metric = metric_named(metric_name.removesuffix("_stderr"))
            if metric is None:
                if comma and metric_name.removesuffix("_stderr") not in own_metrics:
                    found.append(
                        Finding(
                            f"{submission.path} ({name}, {key})",
                            f"{_shown(value)} is reported for a metric that neither the "
                            "plugin's metric table nor the task's metric_list names, so no "
                            "run wrote it",
                        )
                    )
                continue
            problem = _range_problem(metric, stderr, value)
            if problem:
                found.append(Finding(f"{submission.path} ({name}, {key})", f"{value!r} {problem}"))
    return found


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
