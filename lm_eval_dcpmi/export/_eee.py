"""``dcpmi export --format eee``: Every Eval Ever (schema 0.3.0) aggregate records, one per
results file, at ``data/dcpmi/<developer>/<model>/<uuid>.json``, and from a run with
``--log_samples`` the instance-level ``<uuid>_samples.jsonl`` beside each: one row per
document and metric, decided again from the logged loglikelihoods."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from typing import Any

from lm_eval_dcpmi._json_files import checked_name
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.export._export_options import (
    EEE_SCHEMA_VERSION,
    ExportOptions,
    benchmark_of,
    describe,
    finite,
    run_date,
    stable_uuid,
    tasks_of,
)
from lm_eval_dcpmi.report import Output, text_output, wilson
from lm_eval_dcpmi.rules import MEASURES
from lm_eval_dcpmi.task import DERIVED_KEY
from lm_eval_dcpmi.verification import Submission, TaskEntry


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
    benchmark = benchmark_of(task.name, options)
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
    if task.premise_rule is not None:
        parameters[DERIVED_KEY] = task.premise_rule
    if task.premise_sha256 is not None:
        parameters["premise_sha256"] = task.premise_sha256
    return {
        "evaluation_description": describe(metric),
        "metric_id": f"lm-eval-dcpmi.{metric}",
        "metric_name": f"{task.metric_label(metric)} accuracy",
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
        if task.premise_rule is not None:
            generation["additional_details"][DERIVED_KEY] = task.premise_rule
        for metric, value in task.values.items():
            uncertainty: dict[str, Any] = {}
            stderr = finite(task.stderr.get(metric))
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
    when = run_date(submission)
    stamp = str(int(when.timestamp())) if when else str(int(time.time()))
    retrieved = str(int(time.time()))
    assert submission.model.id is not None
    evaluation_id = f"dcpmi/{submission.model.id}/{retrieved}"
    name = stable_uuid(str(submission.path.name), json.dumps(submission.data, sort_keys=True))
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
    from lm_eval_dcpmi.verification import TokenCounts, score_task

    counts = TokenCounts(submission, options.tokenizer)
    for task in tasks_of(submission):
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
                if metric in MEASURES:
                    continue  # an instance's result is a decision; a measure decides nothing
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
    text = resources.files("lm_eval_dcpmi.export").joinpath("schemas", name).read_text()
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
    where = str(submission.path)
    developer, model_name = (checked_name(part, where, "the model id's part")
                             for part in model.split("/", 1))  # fmt: skip
    folder = options.out / "data" / "dcpmi" / developer / model_name
    want_rows = options.instances
    if want_rows is None:
        want_rows = all(t.samples_file for t in tasks_of(submission)) and _has_loglikelihoods(
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
    from lm_eval_dcpmi.report import read_samples

    for task in tasks_of(submission):
        if task.samples_file is None:
            return False
        first = next(iter(read_samples(task.samples_file)), {})
        if not first.get("filtered_resps") or not first.get("arguments"):
            return False
    return True
