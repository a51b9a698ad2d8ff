"""Per-option export: one CSV row per (task, document, option) of runs with logged samples.

The loglikelihoods come from the samples; token counts are not logged, so they are
counted again with the run's tokenizer (``task._tokens.counter_for_metadata`` on the task's
metadata, where lm-eval copied the model arguments), as the task counted them for
``acc_avg``. Each method's pick is ``predictions`` on these numbers; the export
checks it against the per-document values lm-eval logged and says where they differ.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import parse_model_args
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report._results import LABELS, METHODS, ReportError, RunResults
from lm_eval_dcpmi.report._samples import (
    DocumentOptions,
    document_options,
    read_samples,
    task_layout,
)
from lm_eval_dcpmi.rules import METRICS, DocumentScores, predictions

HEADER = (
    "model",
    "task",
    "doc_id",
    "option",
    "text",
    "conditional_loglikelihood",
    "domain_loglikelihood",
    "tokens",
    "characters",
    "gold",
    *(f"chosen_{LABELS[m]}" for m in METHODS),
)


@dataclass
class ExportSummary:
    rows: int = 0
    tasks: list[str] = field(default_factory=list)
    # task -> why its token column is empty (no tokenizer known, or it failed to load)
    no_tokens: dict[str, str] = field(default_factory=dict)
    # (task, method) -> documents where the exported pick disagrees with the logged value
    mismatches: dict[tuple[str, str], int] = field(default_factory=dict)


def _task_samples(run: RunResults, task: str) -> list[Mapping[str, Any]]:
    if task in run.samples_files:
        return read_samples(run.samples_files[task])
    in_memory = run.data.get("samples")
    return list(in_memory.get(task) or []) if isinstance(in_memory, Mapping) else []


def _task_config(run: RunResults, task: str) -> Mapping[str, Any]:
    configs = run.data.get("configs")
    config = configs.get(task) if isinstance(configs, Mapping) else None
    return config if isinstance(config, Mapping) else {}


def _token_counter(run: RunResults, task: str) -> tuple[Any, str]:
    """The task's token counter and, when there is none, why."""
    from lm_eval_dcpmi.task import counter_for_metadata

    metadata = _task_config(run, task).get("metadata")
    config = run.data.get("config")
    if not isinstance(metadata, Mapping) or not metadata.get("pretrained"):
        metadata = parse_model_args(config.get("model_args")) if isinstance(config, Mapping) else {}
    try:
        counter = counter_for_metadata(metadata)
    except DCPMIError as error:
        return None, f"the tokenizer could not be loaded ({error})"
    return counter, "" if counter is not None else "the results name no tokenizer"


def _characters(document: DocumentOptions, delimiter: str) -> list[int]:
    """Each option's length as lm-eval's acc_norm counts it: the option without the
    target delimiter lm-eval put in front of it."""
    return [
        len(text) - (len(delimiter) if delimiter and text.startswith(delimiter) else 0)
        for text in document.options
    ]


def _task_rows(run: RunResults, task: str, summary: ExportSummary) -> Iterator[tuple[Any, ...]]:
    samples = _task_samples(run, task)
    if not samples:
        return
    where = str(run.samples_files.get(task, f"{task} samples"))
    counter, why = _token_counter(run, task)
    if counter is None:
        summary.no_tokens[task] = why
    delimiter = _task_config(run, task).get("target_delimiter", " ")
    delimiter = delimiter if isinstance(delimiter, str) else " "
    summary.tasks.append(task)
    layout = task_layout(_task_config(run, task))
    for sample in sorted(samples, key=lambda s: int(s["doc_id"])):
        if sample.get("filter", "none") != "none":
            continue
        document = document_options(sample, where, layout)
        tokens = None
        if counter is not None:
            pairs = zip(document.contexts, document.options, strict=True)
            tokens = [counter.split(context, option)[1] for context, option in pairs]
        characters = _characters(document, delimiter)
        picks = predictions(
            DocumentScores(document.conditional, document.references, tokens, characters),
            [m for m in METRICS if m.name in METHODS],
        )
        for method, pick in picks.items():
            logged = sample.get(method)
            if logged is None or pick is None or math.isnan(float(logged)):
                continue
            if float(pick == document.gold) != float(logged):
                key = (task, method)
                summary.mismatches[key] = summary.mismatches.get(key, 0) + 1
        for i, text in enumerate(document.options):
            summary.rows += 1
            yield (
                run.model,
                task,
                document.doc_id,
                i,
                text,
                repr(document.conditional[i]),
                repr(document.domain[i]),
                "" if tokens is None else tokens[i],
                characters[i],
                "" if document.gold is None else int(document.gold == i),
                *("" if picks[m] is None else int(picks[m] == i) for m in METHODS),
            )


def write_options_csv(runs: Sequence[RunResults], path: str | Path) -> ExportSummary:
    """Write every option of every logged document of ``runs`` to ``path`` (CSV, see
    ``HEADER``; loglikelihoods in full precision). ``ReportError`` when no run has samples."""
    tasks = [
        (run, row.task)
        for run in runs
        for row in run.rows
        if not row.is_group and (row.task in run.samples_files or row.per_doc)
    ]
    if not tasks:
        raise ReportError(
            "--options-csv needs the per-document samples: run lm_eval with --log_samples "
            "and report its output folder (samples_<task>_<date>.jsonl beside the results)"
        )
    summary = ExportSummary()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", errors="backslashreplace", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(HEADER)
        for run, task in tasks:
            writer.writerows(_task_rows(run, task, summary))
    return summary
