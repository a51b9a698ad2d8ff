"""``dcpmi merge SHARDS... --out DIR``: the shards of one run joined into that run.

Each shard is the ``--output_path`` of ``dcpmi run --shard K/N --log_samples`` (its results
file records ``dcpmi.shard``). Before anything is written, the shards must be one run's:

* K/N (1 <= K <= N) and each task's split size within what the data allows (the tasks
  built here: ``_shard_bounds``), no document in two shards, ``--out`` outside the shards;
* the same N, each K once (two shard 2/4s overlap), none missing (unless
  ``--allow-partial``: the result is then marked partial, and says which are missing);
* the same commit, model and its identity, lm-eval, transformers and plugin versions,
  task configs (premises, data digests), few-shot and prompt settings;
* for each task, a samples file whose documents are exactly the shard's share of a split of
  the size every shard records, with its requests and loglikelihoods, and whose every
  per-document value is what those loglikelihoods give (``recompute``), in range.

The merged run is the unsharded one: its samples file holds every document in order, the
content-free requests only on document 0 (each shard's first document carried them; the
others are dropped, after checking they are the same requests with the same scores); CC is
decided again with document 0's content-free scores and BC over every document; every mean
and standard error is lm-eval's over the merged documents (counts are sums), each group's the
unweighted mean of its tasks (the plugin's groups' ``weight_by_size: false``) with
``sqrt(sum se^2) / k``, as lm-eval 0.4.13 computes it. ``dcpmi verify``, ``report`` and
``export`` then read it as one run's.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import logged_loglikelihood
from lm_eval_dcpmi._identity import sanitized
from lm_eval_dcpmi._json_files import checked_name, read_json, write_json
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.merging import _shard_bounds as shard_bounds
from lm_eval_dcpmi.merging._mergeable import check_mergeable
from lm_eval_dcpmi.report import (
    Output,
    ReportError,
    request_pairs,
    task_hash,
    task_layout,
    write_all,
)
from lm_eval_dcpmi.rules import COUNTS, METRICS, metric_named
from lm_eval_dcpmi.task import Shard
from lm_eval_dcpmi.verification import (
    Submission,
    TokenCounts,
    close_enough,
    logged_number,
    mean_stderr,
    read_submission,
    results_files,
    score_documents,
    task_samples,
)

# What every shard of one run records alike: (where in the results file, what it is).
SAME = (
    (("git_hash",), "the commit"),
    (("lm_eval_version",), "the lm-eval version"),
    (("transformers_version",), "the transformers version"),
    (("dcpmi", "plugin_version"), "the plugin version"),
    (("dcpmi", "model"), "the model's identity"),
    (("config", "model"), "the lm-eval model"),
    (("config", "model_args"), "the model arguments"),
    (("config", "fewshot_seed"), "the few-shot seed"),
    (("configs",), "the task configs (premises, data digests)"),
    (("versions",), "the task versions"),
    (("n-shot",), "the few-shot counts"),
    (("group_subtasks",), "the tasks and groups"),
    (("system_instruction",), "the system instruction"),
    (("chat_template",), "the chat template"),
    (("fewshot_as_multiturn",), "fewshot_as_multiturn"),
)
# Content-free scores of two shards' carriers agree within this: the same requests scored
# in other batches (fp32).
CONTENT_FREE_TOLERANCE = 1e-4


@dataclass
class ShardRun:
    path: Path
    data: dict[str, Any]
    shard: Shard
    submission: Submission

    def __str__(self) -> str:
        return f"shard {self.shard} ({self.path})"


def _get(data: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def read_shard(path: Path) -> ShardRun:
    data = read_json(path)
    shard = shard_bounds.recorded_shard(path, _get(data, ("dcpmi", "shard")))
    return ShardRun(path, data, shard, read_submission(path))


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def check_one_run(shards: Sequence[ShardRun], allow_partial: bool) -> list[int]:
    """Refuse shards that are not one run's (see the module's docstring); the indices
    missing (only with ``allow_partial``)."""
    first = shards[0]
    for other in shards[1:]:
        if other.shard.count != first.shard.count:
            raise DCPMIError(
                f"{other}: a shard of {other.shard.count}, but {first} is a shard of "
                f"{first.shard.count}; merge the shards of one run."
            )
        for keys, what in SAME:
            a, b = _get(first.data, keys), _get(other.data, keys)
            if a != b:
                raise DCPMIError(
                    f"{other}: not the same run as {first}: {what} ({'.'.join(keys)}) differs "
                    f"({_shown(b)} against {_shown(a)}); score every shard with the same "
                    "command, commit and environment."
                )
    seen: dict[int, ShardRun] = {}
    for run in shards:
        if run.shard.index in seen:
            raise DCPMIError(
                f"{run} and {seen[run.shard.index].path} are both shard {run.shard}: they "
                "overlap; give each shard once."
            )
        seen[run.shard.index] = run
    missing = [k for k in range(1, first.shard.count + 1) if k not in seen]
    if missing and not allow_partial:
        names = ", ".join(f"{k}/{first.shard.count}" for k in missing)
        raise DCPMIError(
            f"shard {names} missing (merging {len(shards)} of {first.shard.count}); give every "
            "shard's folder, or --allow-partial to merge these and mark the result partial."
        )
    return missing


@dataclass
class ShardTask:
    """One task of one shard: its samples, read and checked."""

    run: ShardRun
    samples: list[dict[str, Any]]
    documents: int  # the split's size


def _task_of(run: ShardRun, name: str, tokenizer: str | None) -> ShardTask:
    task = run.submission.tasks.get(name)
    if task is None or task.samples_file is None:
        raise DCPMIError(
            f"{run}: no samples file of {name} beside its results file; score the shards "
            "with --log_samples (merge recomputes every number from the samples)."
        )
    where = f"shard {run.shard} ({task.samples_file})"
    try:
        samples = task_samples(task.samples_file, where)
    except ReportError as error:
        text = str(error)
        raise DCPMIError(text if text.startswith(where) else f"shard {run.shard}: {text}") from None
    if task.n_total is None:
        raise DCPMIError(f"{where}: its results record no split size (n-samples original).")
    ids = [s.get("doc_id") for s in samples]
    share = run.shard.indices(task.n_total)
    if ids != share:
        raise DCPMIError(
            f"{where}: its samples log documents {_shown(ids[:4])} ({len(ids)}), but shard "
            f"{run.shard} of a split of {task.n_total} is documents {_shown(share[:4])} "
            f"({len(share)}); the samples are not this shard's."
        )
    if any(not s.get("arguments") for s in samples):
        raise DCPMIError(f"{where}: its samples log no requests; score it with --log_samples.")
    found = score_documents(task, samples, TokenCounts(run.submission, tokenizer), where)[1]
    if found:
        raise DCPMIError(f"{found[0]}: this shard's per-document values are corrupt.")
    for sample in samples:
        for count in COUNTS:
            value = logged_number(sample.get(count, 0))
            if not (0 <= value <= len(sample["filtered_resps"]) and value == int(value)):
                raise DCPMIError(
                    f"{where}: doc {sample['doc_id']}: {count} is {sample.get(count)!r}, not a "
                    "count of its requests: this shard's per-document values are corrupt."
                )
    return ShardTask(run, samples, task.n_total)


def _truncate(sample: dict[str, Any], keep: int) -> None:
    """``sample`` with only its first ``keep`` requests (arguments and answers)."""
    arguments = sample["arguments"]
    if isinstance(arguments, dict):  # the JSONL form: gen_args_<i>
        ordered = sorted(arguments, key=lambda k: int(str(k).rpartition("_")[2]))
        sample["arguments"] = {k: arguments[k] for k in ordered[:keep]}
    else:
        sample["arguments"] = list(arguments)[:keep]
    for key in ("resps", "filtered_resps"):
        if isinstance(sample.get(key), list):
            sample[key] = sample[key][:keep]


def _content_free(part: ShardTask, layout: Any) -> tuple[int, list[tuple[str, str]], list[float]]:
    """The shard's carrier (its first document): how many of its requests are its own, and
    its content-free requests with their loglikelihoods."""
    first = part.samples[0]
    pairs = request_pairs(first["arguments"])
    n, carrier = layout.n_options([c for _, c in pairs])
    if not carrier:
        raise DCPMIError(f"{part.run}: its first document carries no content-free requests.")
    keep = layout.n_requests(n, carrier=False)
    lls = [logged_number(logged_loglikelihood(r)) for r in first["filtered_resps"][keep:]]
    return keep, pairs[keep:], lls


def merge_task(name: str, parts: Sequence[ShardTask], submission: Submission,
               tokenizer: str | None = None) -> list[Any]:  # fmt: skip
    """One task's merged documents, decided again (``ScoredDocument``s in document order;
    their samples hold the merged run's per-document values)."""
    task = submission.tasks[name]
    layout = task_layout(task.config)
    sizes = {p.documents for p in parts}
    if len(sizes) != 1:
        raise DCPMIError(
            f"{parts[-1].run} ({name}): a split of {parts[-1].documents} documents, but "
            f"{parts[0].run} records {parts[0].documents}."
        )
    if layout.content_free:
        # the first shard's carrier carries them for the run, as document 0 does unsharded
        _keep, requests, lls = _content_free(parts[0], layout)
        for part in parts[1:]:
            keep, other_requests, other_lls = _content_free(part, layout)
            far = max((abs(a - b) for a, b in zip(lls, other_lls, strict=True)), default=0.0)
            if other_requests != requests or not far <= CONTENT_FREE_TOLERANCE:
                raise DCPMIError(
                    f"{part.run} ({name}): its content-free requests are not {parts[0].run}'s "
                    + ("(other strings)" if other_requests != requests else f"(|dll| {far:.2g})")
                    + "; the shards are not one run's."
                )
            _truncate(part.samples[0], keep)
    shard_bounds.check_documents_once(name, [(str(p.run), p.samples) for p in parts])
    samples = sorted((s for p in parts for s in p.samples), key=lambda s: int(s["doc_id"]))
    counts = TokenCounts(submission, tokenizer)
    # each shard's values were checked; what differs now is CC under the run's one carrier
    scored, _cc_differences = score_documents(task, samples, counts, f"{name} (merged)")
    corpus = {m.name for m in METRICS if m.corpus is not None}
    for doc in scored:  # as the unsharded run decides CC
        for metric, value in doc.values.items():
            if metric not in corpus and not close_enough(
                value, logged_number(doc.sample.get(metric))
            ):
                doc.sample[metric] = value
    return scored


def task_results(name: str, entry: dict[str, Any], scored: Sequence[Any]) -> dict[str, Any]:
    """The results entry of a merged task: every metric of the shards' entry over the merged
    documents, aggregated as lm-eval aggregates it (the metric table's aggregation)."""
    merged: dict[str, Any] = {k: v for k, v in entry.items() if "," not in k}
    merged["sample_len"] = len(scored)
    for key in entry:
        metric, comma, filter_name = key.partition(",")
        if not comma or metric.endswith("_stderr"):
            continue
        row = metric_named(metric)
        if row is None:
            raise DCPMIError(
                f"{name}: its metric {metric} is the task's own, which merge cannot aggregate "
                "(it knows the plugin's metric table); score this task in one run."
            )
        if row.corpus is not None:
            items = [doc.sample[metric] for doc in scored]
            value, stderr = row.corpus.aggregate(items), "N/A"
        else:
            values = [logged_number(doc.sample[metric]) for doc in scored]
            if row.aggregation == "sum":
                value, stderr = math.fsum(values), "N/A"
            else:
                value, stderr = sum(values) / len(values), mean_stderr(values)  # lm-eval's
                stderr = "N/A" if math.isnan(stderr) else stderr
        merged[key] = value
        merged[f"{metric}_stderr,{filter_name}"] = stderr
    return merged


def group_results(
    name: str, entry: dict[str, Any], members: Sequence[str], results: dict[str, Any]
) -> dict[str, Any]:
    """A group's entry: each metric the unweighted mean of its tasks' (the plugin's groups
    set ``weight_by_size: false``), its standard error ``sqrt(sum se^2) / k``."""
    merged: dict[str, Any] = {k: v for k, v in entry.items() if "," not in k}
    merged["sample_len"] = sum(int(results[m].get("sample_len", 0)) for m in members)
    for key in entry:
        metric, comma, filter_name = key.partition(",")
        if not comma or metric.endswith("_stderr"):
            continue
        having = [m for m in members if key in results[m]]
        values = [results[m][key] for m in having]
        errors = [results[m].get(f"{metric}_stderr,{filter_name}") for m in having]
        merged[key] = math.fsum(values) / len(values)
        numeric = [e for e in errors if isinstance(e, (int, float))]
        stderr_key = f"{metric}_stderr,{filter_name}"
        if len(numeric) == len(values):
            merged[stderr_key] = math.sqrt(math.fsum(e**2 for e in numeric)) / len(numeric)
        else:
            merged[stderr_key] = "N/A"
    return merged


def merge(
    paths: Sequence[Path],
    out: Path,
    allow_partial: bool = False,
    data_dir: str | None = None,
    include_path: Sequence[str] = (),
    tokenizer: str | None = None,
) -> list[Path]:
    """Merge the shards under ``paths`` into one results file and one samples file per task
    under ``out/<model>/``, written all or nothing; returns the files written. The tasks
    are built from the data (``data_dir``, ``include_path``) to bound what the shards
    record (``_shard_bounds``); ``tokenizer``: the tokenizer of a model not at hand under its
    recorded name."""
    shard_bounds.check_out(out, paths)
    shards = sorted((read_shard(p) for p in results_files(paths)), key=lambda r: r.shard.index)
    shard_bounds.check_split_sizes(shards, data_dir, include_path, tokenizer)
    missing = check_one_run(shards, allow_partial)
    first = shards[0]
    names = [n for n, t in first.submission.tasks.items() if not t.is_group]
    for run in shards[1:]:
        others = sorted(t for t, e in run.submission.tasks.items() if not e.is_group)
        if others != sorted(names):
            raise DCPMIError(
                f"{run}: scores tasks {_shown(others)}, but {first} scores {_shown(sorted(names))}."
            )
    check_mergeable(shards, names)
    data = copy.deepcopy(first.data)
    samples_of: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        parts = [_task_of(run, name, tokenizer) for run in shards]
        scored = merge_task(name, parts, first.submission, tokenizer)
        samples_of[name] = [doc.sample for doc in scored]
        data["results"][name] = task_results(name, first.data["results"][name], scored)
        data["n-samples"][name] = {"original": parts[0].documents, "effective": len(scored)}
        data.setdefault("task_hashes", {})[name] = task_hash(samples_of[name])
    groups = data.get("group_subtasks") or {}
    for group, members in groups.items():
        if members and group in data["results"]:
            data["results"][group] = group_results(
                group, first.data["results"][group], members, data["results"]
            )
    block = data.setdefault("dcpmi", {})
    block.pop("shard", None)
    block["merged"] = {
        "shards": first.shard.count,
        "from": [
            {"shard": str(r.shard), "results_file": r.path.name, "date": r.data.get("date")}
            for r in shards
        ],
        **({"partial": True, "missing": [f"{k}/{first.shard.count}" for k in missing]}
           if missing else {}),
    }  # fmt: skip
    data["date"] = max(logged_number(r.data.get("date")) for r in shards)
    seconds = [logged_number(r.data.get("total_evaluation_time_seconds")) for r in shards]
    data["total_evaluation_time_seconds"] = str(math.fsum(seconds))
    return _write(out, data, samples_of, str(first.path))


def _write(out: Path, data: dict[str, Any], samples_of: dict[str, list], where: str) -> list[Path]:
    if out.exists() and not out.is_dir():
        raise DCPMIError(f"--out {out}: a file, not a folder; give a folder to write into.")
    if out.is_dir() and any(out.rglob("results_*.json")):
        raise DCPMIError(
            f"--out {out}: holds results files already; give a new or empty folder (merge "
            "never mixes its run with others)."
        )
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S.%f")
    model = checked_name(sanitized(str(data.get("model_name") or "model")), where, "model_name")
    folder = out / model  # names read from the shards' files: each checked (one file's name)
    outputs = [
        Output(folder / f"results_{stamp}.json", lambda path: write_json(path, data)),
        *(
            Output(
                folder / f"samples_{checked_name(name, where, 'the task name')}_{stamp}.jsonl",
                _samples_writer(samples),
            )
            for name, samples in samples_of.items()
        ),
    ]
    return write_all(outputs, out)


def _samples_writer(samples: list[dict[str, Any]]) -> Any:
    def write(path: Path) -> None:
        with path.open("w", encoding="utf-8") as file:
            for sample in samples:
                file.write(json.dumps(sample, ensure_ascii=False, default=str) + "\n")

    return write
