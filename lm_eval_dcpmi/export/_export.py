"""``dcpmi export RESULTS... --format FORMAT --out DIR``: results for leaderboards.

Formats (docs/leaderboards.md shows each field):

* ``_eee``: Every Eval Ever (schema 0.3.0) aggregate records, one per results file, at
  ``data/dcpmi/<developer>/<model>/<uuid>.json``; each metric with what it is, bounds 0-1,
  its standard error, 95% Wilson interval and document count, the source dataset (Hub id,
  split, data-file digests) and the prompt configuration (zero-shot, domain premise).
  From a run with ``--log_samples``, the instance-level ``<uuid>_samples.jsonl`` beside it:
  one row per document and metric, decided again from the logged loglikelihoods.
* ``hf``: the Hub's ``.eval_results/<task>.yaml``, one entry per task: the headline
  metric's value, the task's Hub dataset, and notes that name DC-PMI, the plugin version,
  the premise digest and every other metric.
* ``model-index``: a model card (``README.md``) whose ``model-index`` front matter
  ``huggingface_hub`` writes, with every metric of every task and group.

What must not be submitted is refused, naming the file (``refusals``). Each format is a
module (``_eee``, ``_hub``, ``_model_card``); what they share is ``_export_options``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lm_eval_dcpmi import __version__
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.export._eee import write_eee
from lm_eval_dcpmi.export._export_options import (
    FORMATS,
    HEADLINE,
    ExportOptions,
    benchmark_of,
    documents_text,
    tasks_of,
)
from lm_eval_dcpmi.export._hub import write_hub
from lm_eval_dcpmi.export._model_card import write_model_card
from lm_eval_dcpmi.report import Output, write_all
from lm_eval_dcpmi.verification import Submission, installed_differences


def refusals(submission: Submission, options: ExportOptions) -> list[str]:
    """Why ``submission`` must not be exported as it is (empty: it may)."""
    from lm_eval_dcpmi.verification import model_findings, value_findings

    found = [f"{finding}; dcpmi verify lists every problem" for finding in
             value_findings(submission) + model_findings(submission)]  # fmt: skip
    if submission.model.id is None:
        found.append(
            f"{submission.path}: names its model {submission.model.name} "
            f"({submission.model.how}), not by a hub id; give --model_id ORG/NAME."
        )
    partial = submission.partial_tasks
    if partial and not options.allow_partial:
        limit = f" (--limit {submission.limit})" if submission.limit is not None else ""
        found.append(
            f"{submission.path}: a partial run{limit}: {documents_text(submission, partial)}; "
            "leaderboards compare whole splits. Rerun without --limit/--samples, or give "
            "--allow-partial to export it marked as partial."
        )
    if not options.allow_other_version:
        found += [
            f"{line}; rerun with the installed plugin, or give --allow-other-version to "
            "export it marked as such."
            for line in installed_differences(submission)
        ]
    if options.instances and options.format == "eee":
        missing = [t.name for t in tasks_of(submission) if t.samples_file is None]
        if missing:
            found.append(
                f"{submission.path}: no samples file for {', '.join(missing)}, but --instances "
                "asks for instance-level records; rerun with --log_samples."
            )
    if options.format in ("hf", "model-index"):
        unknown = [t.name for t in tasks_of(submission) if benchmark_of(t.name, options) is None]
        if unknown:
            found.append(
                f"{submission.path}: no Hub dataset is known for {', '.join(unknown)}; give "
                "--dataset TASK=HUB_ID[:TASK_ID[:SPLIT]] for each."
            )
    return found


WRITERS = {"eee": write_eee, "hf": write_hub, "model-index": write_model_card}


def export(submissions: Sequence[Submission], options: ExportOptions) -> list[Path]:
    """Write ``submissions`` in ``options.format``, all files or none; refuses
    (``DCPMIError``, the first reason) before writing anything when one must not be
    exported."""
    if options.format not in WRITERS:
        raise DCPMIError(f"--format {options.format!r}: choose one of {', '.join(FORMATS)}.")
    if options.format == "model-index" and len(submissions) > 1:
        models = {s.model.id for s in submissions}
        if len(models) > 1:
            raise DCPMIError(
                "--format model-index writes one model card: the results name several models "
                f"({', '.join(sorted(str(m) for m in models))}); export them one at a time."
            )
    seen: dict[str, Path] = {}
    for submission in submissions:
        found = refusals(submission, options)
        if found:
            raise DCPMIError(found[0])
        for task in tasks_of(submission):
            if task.name in seen and seen[task.name] != submission.path:
                raise DCPMIError(
                    f"{submission.path} and {seen[task.name]} both hold {task.name}: one "
                    "export takes one run of a task; export the run you mean."
                )
            seen[task.name] = submission.path
    if options.format == "model-index" and len(submissions) > 1:
        merged = submissions[0]
        for other in submissions[1:]:
            merged.tasks.update(other.tasks)
        submissions = [merged]
    outputs: list[Output] = []
    for submission in submissions:
        outputs += WRITERS[options.format](submission, options)
    # every file or none (a full disk, a read-only --out, Ctrl-C: nothing half written)
    return write_all(outputs, options.out)


__all__ = ["FORMATS", "HEADLINE", "ExportOptions", "__version__", "export"]
