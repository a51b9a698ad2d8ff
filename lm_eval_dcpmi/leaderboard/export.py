"""``dcpmi export RESULTS... --format FORMAT --out DIR``: results for leaderboards.

Formats (docs/leaderboards.md shows each field):

* ``eee``: Every Eval Ever (schema 0.3.0) aggregate records, one per results file, at
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

What must not be submitted is refused, naming the file (``refusals``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import __version__
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.leaderboard.benchmarks import BENCHMARKS, Benchmark
from lm_eval_dcpmi.leaderboard.submission import Submission, TaskEntry, installed_differences
from lm_eval_dcpmi.report import looks
from lm_eval_dcpmi.report.looks import PAPER
from lm_eval_dcpmi.report.stats import wilson
from lm_eval_dcpmi.report.writing import Output, text_output, write_all
from lm_eval_dcpmi.rules import scoring
from lm_eval_dcpmi.tasks import premise_digest

FORMATS = ("eee", "hf", "model-index")
HEADLINE = scoring.HEADLINE
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
    row = scoring.metric_named(metric)
    rule = row.rule if row is not None else metric
    return f"accuracy, option with the highest {rule} ({looks.look(metric).description})"


def refusals(submission: Submission, options: ExportOptions) -> list[str]:
    """Why ``submission`` must not be exported as it is (empty: it may)."""
    from lm_eval_dcpmi.leaderboard.refusals import model_findings, value_findings

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
            f"{submission.path}: a partial run{limit}: {_documents(submission, partial)}; "
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
        missing = [t.name for t in _tasks(submission) if t.samples_file is None]
        if missing:
            found.append(
                f"{submission.path}: no samples file for {', '.join(missing)}, but --instances "
                "asks for instance-level records; rerun with --log_samples."
            )
    if options.format in ("hf", "model-index"):
        unknown = [t.name for t in _tasks(submission) if _benchmark(t.name, options) is None]
        if unknown:
            found.append(
                f"{submission.path}: no Hub dataset is known for {', '.join(unknown)}; give "
                "--dataset TASK=HUB_ID[:TASK_ID[:SPLIT]] for each."
            )
    return found


def _documents(submission: Submission, names: Sequence[str]) -> str:
    shown = [f"{n} {submission.tasks[n].n} of {submission.tasks[n].n_total}" for n in names[:4]]
    more = f", and {len(names) - 4} more" if len(names) > 4 else ""
    return ", ".join(shown) + more + " documents"


def _tasks(submission: Submission) -> list[TaskEntry]:
    return [t for t in submission.tasks.values() if not t.is_group]


def _benchmark(task: str, options: ExportOptions) -> Benchmark | None:
    return options.datasets.get(task) or BENCHMARKS.get(task)


def _date(submission: Submission) -> dt.datetime | None:
    stamp = submission.data.get("date")
    try:
        return dt.datetime.fromtimestamp(float(stamp), tz=dt.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _stable_uuid(*parts: str) -> str:
    """A version-4-shaped UUID from ``parts``: the same submission gives the same name."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else value


# ---------------------------------------------------------------- Every Eval Ever


def _interval(task: TaskEntry, value: float) -> dict[str, Any] | None:
    if task.is_group or task.n is None or task.n < 1:
        return None
    successes = round(value * task.n)
    if abs(successes - value * task.n) > 1e-6:
        return None
    lower, upper = wilson(successes, task.n)
    return {"lower": lower, "upper": upper, "confidence_level": 0.95, "method": "wilson"}


def _source_data(task: TaskEntry, options: ExportOptions, submission: Submission) -> dict:
    details = {"task": task.name}
    if task.data_files:
        details["data_files_sha256"] = json.dumps(task.data_files, sort_keys=True)
    if task.partial:
        details["partial"] = f"{task.n} of {task.n_total} documents"
    if task.is_group:
        details["tasks"] = ", ".join(task.subtasks)
        return {
            "dataset_name": f"{task.name}: unweighted mean over {len(task.subtasks)} tasks",
            "source_type": "other",
            "additional_details": details,
        }
    benchmark = _benchmark(task.name, options)
    if benchmark is None:
        return {"dataset_name": task.name, "source_type": "other", "additional_details": details}
    details["hf_config"] = benchmark.task_id
    found: dict[str, Any] = {
        "dataset_name": benchmark.name,
        "source_type": "hf_dataset",
        "hf_repo": benchmark.hub_id,
        "hf_split": benchmark.split,
        "additional_details": details,
    }
    if task.n is not None:
        found["samples_number"] = task.n
    return found


def _metric_config(task: TaskEntry, metric: str) -> dict[str, Any]:
    parameters: dict[str, Any] = {"num_fewshot": 0, "scoring": "loglikelihood"}
    if task.domain_premise is not None:
        parameters["domain_premise"] = task.domain_premise
    if task.premise_sha256 is not None:
        parameters["premise_sha256"] = task.premise_sha256
    return {
        "evaluation_description": describe(metric),
        "metric_id": f"lm-eval-dcpmi.{metric}",
        "metric_name": f"{looks.label(metric)} accuracy",
        "metric_kind": "accuracy",
        "metric_unit": "proportion",
        "metric_parameters": parameters,
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0.0,
        "max_score": 1.0,
    }


def _evaluation_results(
    submission: Submission, options: ExportOptions, stamp: str
) -> list[dict[str, Any]]:
    results = []
    for task in submission.tasks.values():
        prompt = task.config.get("doc_to_text")
        generation: dict[str, Any] = {"additional_details": {"num_fewshot": "0"}}
        if isinstance(prompt, str):
            generation["generation_args"] = {"prompt_template": prompt}
        if task.domain_premise is not None:
            generation["additional_details"]["domain_premise"] = str(task.domain_premise)
        for metric, value in task.values.items():
            uncertainty: dict[str, Any] = {}
            stderr = _finite(task.stderr.get(metric))
            if stderr is not None:
                uncertainty["standard_error"] = {"value": stderr, "method": "analytic"}
            interval = _interval(task, value)
            if interval is not None:
                uncertainty["confidence_interval"] = interval
            if task.n is not None:
                uncertainty["num_samples"] = task.n
            details = {"lm_eval_metric": f"{metric},none"}
            if task.version:
                details["task_version"] = task.version
            if task.partial:
                details["partial"] = f"{task.n} of {task.n_total} documents"
            results.append(
                {
                    "evaluation_result_id": f"{task.name}:{metric}",
                    "evaluation_name": task.name,
                    "source_data": _source_data(task, options, submission),
                    "evaluation_timestamp": stamp,
                    "metric_config": _metric_config(task, metric),
                    "score_details": {
                        "score": value,
                        "details": details,
                        "uncertainty": uncertainty,
                    },
                    "generation_config": generation,
                }
            )
    return results


def _model_info(submission: Submission) -> dict[str, Any]:
    model = submission.model
    config = (
        submission.data.get("config") if isinstance(submission.data.get("config"), dict) else {}
    )
    details = {
        "deployment_type": "self_deployed",
        "model_availability": "open_weights" if model.how.startswith("the embedded") else "unknown",
        "lm_eval_model": str(config.get("model", "")),
    }
    for key in ("revision", "file", "file_sha256", "package"):
        value = getattr(model, key)
        if value:
            details[key] = str(value)
    if config.get("model_dtype"):
        details["dtype"] = str(config["model_dtype"])
    assert model.id is not None  # refusals() saw to it
    return {
        "name": model.id,
        "id": model.id,
        "developer": model.id.split("/")[0],
        "inference_engine": {"name": "transformers"},
        "additional_details": details,
    }


def eee_record(submission: Submission, options: ExportOptions) -> tuple[str, dict[str, Any]]:
    """The aggregate record of ``submission`` and its UUID (its file name)."""
    when = _date(submission)
    stamp = str(int(when.timestamp())) if when else str(int(time.time()))
    retrieved = str(int(time.time()))
    assert submission.model.id is not None
    evaluation_id = f"dcpmi/{submission.model.id}/{retrieved}"
    name = _stable_uuid(str(submission.path.name), json.dumps(submission.data, sort_keys=True))
    lm_eval_version = submission.data.get("lm_eval_version") or "unknown"
    record = {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "evaluation_timestamp": stamp,
        "retrieved_timestamp": retrieved,
        "source_metadata": {
            "source_name": "lm-eval-dcpmi",
            "source_type": "evaluation_run",
            "source_organization_name": options.organization,
            "evaluator_relationship": options.relationship,
            "additional_details": {
                "results_file": submission.path.name,
                "plugin_version": str(submission.plugin_version or "not recorded"),
            },
        },
        "eval_library": {
            "name": "lm_eval",
            "version": str(lm_eval_version),
            "additional_details": {
                "plugin": "lm-eval-dcpmi",
                "plugin_version": str(submission.plugin_version or "not recorded"),
            },
        },
        "model_info": _model_info(submission),
        "evaluation_results": _evaluation_results(submission, options, stamp),
    }
    return name, record


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def instance_rows(
    submission: Submission, options: ExportOptions, evaluation_id: str
) -> Iterator[dict[str, Any]]:
    """Every document and metric of ``submission``'s tasks as instance-level records."""
    from lm_eval_dcpmi.leaderboard.recompute import TokenCounts, score_task

    counts = TokenCounts(submission, options.tokenizer)
    for task in _tasks(submission):
        scored, findings = score_task(task, counts)
        if findings:
            raise DCPMIError(
                f"{findings[0]}; the instance-level records would not match the results "
                "(dcpmi verify lists every difference)."
            )
        for doc in scored:
            options_text = [o for o in doc.options.options]
            gold = doc.options.gold
            assert gold is not None
            premise = doc.options.contexts[gold]
            reference = [options_text[gold]]
            metadata = {
                "doc_id": str(doc.options.doc_id),
                "gold_index": str(gold),
                "loglikelihoods": json.dumps(doc.options.conditional),
                "domain_loglikelihoods": json.dumps(doc.options.domain),
            }
            for name, values in doc.options.references.items():
                if name != "domain":
                    metadata[f"{name}_loglikelihoods"] = json.dumps(values)
            sample_hash = doc.sample.get("doc_hash")
            for metric, value in doc.values.items():
                pick = doc.picks.get(metric)
                chosen = options_text[pick] if pick is not None else ""
                yield {
                    "schema_version": EEE_SCHEMA_VERSION,
                    "evaluation_id": evaluation_id,
                    "model_id": submission.model.id,
                    "evaluation_name": task.name,
                    "evaluation_result_id": f"{task.name}:{metric}",
                    "sample_id": str(doc.options.doc_id),
                    "sample_hash": sample_hash if isinstance(sample_hash, str) else None,
                    "interaction_type": "single_turn",
                    "input": {"raw": premise, "reference": reference, "choices": options_text},
                    "output": {"raw": [chosen]},
                    "answer_attribution": [
                        {
                            "turn_idx": 0,
                            "source": "output.raw",
                            "extracted_value": chosen,
                            "extraction_method": f"argmax of {metric} scores over the choices",
                            "is_terminal": True,
                        }
                    ],
                    "evaluation": {"score": value, "is_correct": value == 1.0},
                    "metadata": {**metadata, "prediction_index": _text(pick)},
                }


def _schema(name: str) -> dict[str, Any]:
    text = resources.files("lm_eval_dcpmi.leaderboard").joinpath("schemas", name).read_text()
    return json.loads(text)


def validate_eee(record: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What in ``record`` and ``rows`` breaks the vendored Every Eval Ever schemas (empty:
    valid); None-like ``["not validated ..."]`` when ``jsonschema`` is missing."""
    try:
        import jsonschema
    except ImportError:  # never a record exported unchecked
        raise DCPMIError(
            "the Every Eval Ever records cannot be validated: the jsonschema package is not "
            "installed; pip install jsonschema (it comes with lm-eval-dcpmi[leaderboard])."
        ) from None
    problems = []
    for label, schema, items in (
        ("aggregate record", "eval.schema.json", [record]),
        ("instance-level record", "instance_level_eval.schema.json", rows),
    ):
        validator = jsonschema.Draft7Validator(_schema(schema))
        for index, item in enumerate(items):
            for error in validator.iter_errors(item):
                where = "/".join(str(p) for p in error.absolute_path) or "(top)"
                problems.append(f"{label} {index}: {where}: {error.message}")
                break
    return problems


def write_eee(submission: Submission, options: ExportOptions) -> list[Output]:
    name, record = eee_record(submission, options)
    model = submission.model.id or ""
    folder = options.out / "data" / "dcpmi" / model.split("/")[0] / model.split("/")[1]
    want_rows = options.instances
    if want_rows is None:
        want_rows = all(t.samples_file for t in _tasks(submission)) and _has_loglikelihoods(
            submission
        )
    rows = list(instance_rows(submission, options, record["evaluation_id"])) if want_rows else []
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if rows:
        relative = f"data/dcpmi/{model}/{name}_samples.jsonl"
        record["detailed_evaluation_results"] = {
            "format": "jsonl",
            "file_path": relative,
            "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(lines.encode("utf-8")).hexdigest(),
            "total_rows": len(rows),
        }
    problems = validate_eee(record, rows)
    if problems:
        raise DCPMIError(
            f"{submission.path}: the Every Eval Ever record does not validate against schema "
            f"{EEE_SCHEMA_VERSION} ({problems[0]}); please report this as a bug."
        )
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    outputs = [text_output(folder / f"{name}.json", text)]
    if rows:
        outputs.append(text_output(folder / f"{name}_samples.jsonl", lines))
    return outputs


def _has_loglikelihoods(submission: Submission) -> bool:
    from lm_eval_dcpmi.report.samples import read_samples

    for task in _tasks(submission):
        if task.samples_file is None:
            return False
        first = next(iter(read_samples(task.samples_file)), {})
        if not first.get("filtered_resps") or not first.get("arguments"):
            return False
    return True


# ---------------------------------------------------------------- the Hub


def _notes(submission: Submission, task: TaskEntry, headline: str) -> str:
    parts = [
        f"{headline}: {describe(headline)}",
        "zero-shot",
        f"lm-eval-dcpmi {submission.plugin_version or 'version not recorded'}",
        f"lm-eval {submission.data.get('lm_eval_version') or 'unknown'}",
    ]
    digest = task.premise_sha256 or premise_digest.digest_in(task.version)
    if task.domain_premise is not None:
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
    when = _date(submission)
    found = {}
    for task in _tasks(submission):
        if options.headline not in task.values:
            raise DCPMIError(
                f"{submission.path} ({task.name}): reports no {options.headline}; choose "
                f"--headline among {', '.join(task.values)}."
            )
        benchmark = _benchmark(task.name, options)
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
            folder / f"{task}.yaml", yaml.safe_dump(items, sort_keys=False, allow_unicode=True)
        )
        for task, items in hub_entries(submission, options).items()
    ]


# ---------------------------------------------------------------- model cards


def eval_results(submission: Submission, options: ExportOptions) -> list[Any]:
    """``huggingface_hub.EvalResult``s: every metric of every task and group."""
    from huggingface_hub import EvalResult

    found = []
    for task in submission.tasks.values():
        benchmark = None if task.is_group else _benchmark(task.name, options)
        for metric, value in task.values.items():
            common = {
                "task_type": "multiple-choice",
                "metric_type": metric,
                "metric_value": value,
                "metric_name": f"{looks.label(metric)} accuracy"
                + (" (partial)" if task.partial else ""),
                "metric_config": task.name,
            }
            if options.source_url:  # huggingface_hub takes a source's name only with its url
                common.update(source_name="lm-eval-dcpmi", source_url=options.source_url)
            if benchmark is not None:
                found.append(
                    EvalResult(
                        dataset_type=benchmark.hub_id,
                        dataset_name=benchmark.name,
                        dataset_config=benchmark.task_id,
                        dataset_split=benchmark.split,
                        **common,
                    )
                )
            else:
                found.append(
                    EvalResult(
                        dataset_type=f"lm-eval-dcpmi/{task.name}",
                        dataset_name=f"{task.name} (mean over {len(task.subtasks)} tasks)",
                        **common,
                    )
                )
    return found


def write_model_card(submission: Submission, options: ExportOptions) -> list[Output]:
    from huggingface_hub import ModelCard, ModelCardData

    assert submission.model.id is not None
    data = ModelCardData(
        model_name=submission.model.id, eval_results=eval_results(submission, options)
    )
    body = (
        f"# {submission.model.id}\n\nZero-shot multiple-choice accuracies scored with "
        f"[lm-eval-dcpmi](https://pypi.org/project/lm-eval-dcpmi/) "
        f"{submission.plugin_version or ''} on lm-eval "
        f"{submission.data.get('lm_eval_version') or ''}: DC-PMI ({PAPER}) beside the usual "
        "scores, from one set of requests.\n"
    )
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
    return [text_output(options.out / "README.md", str(card))]


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
        for task in _tasks(submission):
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


__all__ = ["ExportOptions", "export", "FORMATS", "__version__"]
