"""``dcpmi export --format hf``: the Hub's ``.eval_results/<task>.yaml``, one entry per task:
the headline metric's value, the task's Hub dataset, and notes that name DC-PMI, the plugin
version, the premise digest and every other metric."""

from __future__ import annotations

from typing import Any

from lm_eval_dcpmi._json_files import checked_name
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.export._export_options import (
    ExportOptions,
    benchmark_of,
    describe,
    run_date,
    tasks_of,
)
from lm_eval_dcpmi.report import Output, text_output
from lm_eval_dcpmi.task import derived_label, premise_digest_in
from lm_eval_dcpmi.verification import Submission, TaskEntry


def _notes(submission: Submission, task: TaskEntry, headline: str) -> str:
    parts = [
        f"{headline}: {describe(headline)}",
        "zero-shot",
        f"lm-eval-dcpmi {submission.plugin_version or 'version not recorded'}",
        f"lm-eval {submission.data.get('lm_eval_version') or 'unknown'}",
    ]
    digest = task.premise_sha256 or premise_digest_in(task.version)
    if task.premise_rule is not None:
        parts.append(
            f"{derived_label(task.premise_rule)}: no domain premise written, "
            f"each document's derived from its premise (sha256 {digest[:8] or '?'})"
        )
    elif task.domain_premise is not None:
        parts.append(f"domain premise {task.domain_premise!r} (sha256 {digest[:8] or '?'})")
    if task.n is not None:
        parts.append(f"n={task.n}" + (f" of {task.n_total} (PARTIAL)" if task.partial else ""))
    stderr = task.stderr.get(headline)
    if stderr is not None:
        parts.append(f"stderr {stderr:.4f}")
    others = [f"{m} {v:.4f}" for m, v in task.values.items() if m != headline]
    if others:
        parts.append("also " + ", ".join(others))
    return "; ".join(parts)


def hub_entries(submission: Submission, options: ExportOptions) -> dict[str, list[dict]]:
    """``{task: [entry]}`` for ``.eval_results/<task>.yaml`` (groups have no Hub dataset)."""
    when = run_date(submission)
    found = {}
    for task in tasks_of(submission):
        if options.headline not in task.values:
            raise DCPMIError(
                f"{submission.path} ({task.name}): reports no {options.headline}; choose "
                f"--headline among {', '.join(task.values)}."
            )
        benchmark = benchmark_of(task.name, options)
        assert benchmark is not None
        entry: dict[str, Any] = {
            "dataset": {"id": benchmark.hub_id, "task_id": benchmark.task_id},
            "value": task.values[options.headline],
        }
        if when is not None:
            entry["date"] = when.date().isoformat()
        if options.source_url:
            entry["source"] = {"url": options.source_url, "name": "lm-eval-dcpmi results"}
        entry["notes"] = _notes(submission, task, options.headline)
        found[task.name] = [entry]
    return found


def write_hub(submission: Submission, options: ExportOptions) -> list[Output]:
    import yaml

    folder = options.out / ".eval_results"
    return [
        text_output(
            folder / f"{checked_name(task, str(submission.path), 'the task name')}.yaml",
            yaml.safe_dump(items, sort_keys=False, allow_unicode=True),
        )
        for task, items in hub_entries(submission, options).items()
    ]
