"""One results file of a whole split from the parts it was scored in.

A split too long for one session (HellaSwag: ~2 h on 2 cores) is scored in parts, each a
``dcpmi run --samples`` over a contiguous range of documents (``scripts/score_parts.py``).
``join_parts`` checks that the parts are one run's (same model, model arguments, task
configuration, premise and data files; their documents cover the split exactly once) and
recomputes the task's metrics over the joined per-document values, with lm-eval's own
aggregations: a mean with ``mean_stderr``, or a sum. A corpus-level metric (BC) is refused:
its value over parts is not its value over the split.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.leaderboard.portable import read_json
from lm_eval_dcpmi.report.results import ReportError
from lm_eval_dcpmi.report.samples import read_samples, samples_files
from lm_eval_dcpmi.rules import scoring

# What may differ between the parts of one run: the rest of their results files must agree.
PER_PART = ("results", "n-samples", "task_hashes", "date", "total_evaluation_time_seconds")
PART = "dcpmi_part"


class MissingDocuments(ReportError):
    """The parts do not cover the split yet (or cover a document twice)."""


def _read(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data.get(PART), dict):
        raise ReportError(
            f"{path}: not a part of a split (no {PART!r}); parts are written by "
            "scripts/score_parts.py"
        )
    return data


def _first_difference(a: Any, b: Any, where: str = "") -> str | None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{where}/{key}"
            found = _first_difference(a[key], b[key], f"{where}/{key}")
            if found:
                return found
        return None
    return None if a == b else where or "/"


def mean_stderr(values: Sequence[float]) -> float:
    """lm-eval's ``mean_stderr``: the sample standard deviation over the square root of n."""
    n = len(values)
    mu = math.fsum(values) / n
    return math.sqrt(math.fsum((x - mu) ** 2 for x in values) / (n - 1)) / math.sqrt(n)


def aggregate(metric: str, values: Sequence[float], where: str) -> tuple[float, float | str]:
    """A metric's value over a split and its standard error, as lm-eval aggregates it."""
    row = scoring.metric_named(metric)
    if row is None or row.aggregation not in ("mean", "sum"):  # BC, or another plugin's
        raise ReportError(
            f"{where}: {metric} is {'not a DC-PMI metric' if row is None else 'corpus-level'}"
            ": its value over the parts is not its value over the split. Score this task "
            "in one run."
        )
    if row.aggregation == "sum":
        return math.fsum(values), "N/A"
    return math.fsum(values) / len(values), mean_stderr(values)


def join_parts(paths: Sequence[Path]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The results (lm-eval's shape, with ``dcpmi_parts`` listing the parts) and the samples
    of a split scored in parts; ``ReportError`` names the part at fault."""
    if not paths:
        raise ReportError("no parts to join")
    parts = sorted(((path, _read(path)) for path in paths), key=lambda p: p[1][PART]["first"])
    first_path, first = parts[0]
    task = first[PART]["task"]
    common = {k: v for k, v in first.items() if k not in (*PER_PART, PART)}
    samples: list[dict[str, Any]] = []
    listed = []
    for path, data in parts:
        part = data[PART]
        if part["task"] != task or part["documents"] != first[PART]["documents"]:
            raise ReportError(
                f"{path}: a part of {part['task']} ({part['documents']} documents), not of "
                f"{task} ({first[PART]['documents']} documents) as {first_path}"
            )
        differs = _first_difference(common, {k: v for k, v in data.items() if k in common})
        if differs:
            raise ReportError(
                f"{path}: not the same run as {first_path}: {differs} differs (model, its "
                "arguments, the task's configuration, premise or data files). Score every "
                "part with the same command and commit (scripts/score_parts.py records it)."
            )
        files = samples_files(path, [task])
        if task not in files:
            raise ReportError(f"{path}: no samples file of {task} beside it")
        scored = [s for s in read_samples(files[task]) if s.get("filter", "none") == "none"]
        ids = [s["doc_id"] for s in scored]
        if ids != list(range(part["first"], part["last"] + 1)):
            raise ReportError(
                f"{files[task]}: documents {ids[:3]}...{ids[-1:]} ({len(ids)}), but the part "
                f"is documents {part['first']} to {part['last']}"
            )
        samples += scored
        listed.append(
            {
                "results_file": path.name,
                "date": data.get("date"),
                "task_hash": (data.get("task_hashes") or {}).get(task),
            }
            | {k: v for k, v in part.items() if k not in ("task", "documents")}
        )
    documents = first[PART]["documents"]
    ids = [s["doc_id"] for s in samples]
    if ids != list(range(documents)):
        present = set(ids)
        missing = [i for i in range(documents) if i not in present]
        repeated = len(ids) - len(present)
        raise MissingDocuments(
            f"the parts of {task} cover {len(present)} of its {documents} documents"
            + (f" (missing {missing[0]} to {missing[-1]}: {len(missing)})" if missing else "")
            + (f" ({repeated} scored twice)" if repeated else "")
            + "; score the missing parts (scripts/score_parts.py resumes) before joining"
        )
    joined = copy.deepcopy(common)
    result: dict[str, Any] = {"name": task, "alias": task, "sample_len": documents}
    for key in first["results"][task]:
        metric, _, filter_name = key.partition(",")
        if filter_name != "none" or metric.endswith("_stderr"):
            continue
        lacking = next((s["doc_id"] for s in samples if metric not in s), None)
        if lacking is not None:
            aggregate(metric, [], str(first_path))  # a corpus-level metric: say so first
            raise ReportError(f"{first_path}: document {lacking} has no {metric} in its samples")
        value, stderr = aggregate(metric, [float(s[metric]) for s in samples], str(first_path))
        result[key] = value
        result[f"{metric}_stderr,none"] = stderr
    joined["results"] = {task: result}
    joined["n-samples"] = {task: {"original": documents, "effective": documents}}
    joined["date"] = max(data.get("date") or 0 for _, data in parts)
    seconds = math.fsum(data[PART]["wall_seconds"] for _, data in parts)
    # each part's wall time, its model load and request building included
    joined["dcpmi_task_seconds"] = {task: round(seconds, 1)}
    joined["dcpmi_parts"] = listed
    return joined, samples
