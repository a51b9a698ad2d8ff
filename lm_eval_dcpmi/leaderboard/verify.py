"""``dcpmi verify RESULTS...``: rebuild what a submission scored, and recompute its numbers.

A submission is trusted for nothing that can be rebuilt. For every DC-PMI task of a
results file, with the samples file beside it:

1. **Rebuilt from the data** (``rebuild``: the installed task, the data files at hand, the
   run's few-shot and prompt settings): the split's size against the recorded counts; the
   logged document indices (whole numbers, each once, the range the run covered: whole
   split, ``--limit`` prefix or ``--shard``); each document's requests (context and
   continuation, domain premise and CC's content-free ones too), target and lm-eval's
   three hashes; ``resps`` against ``filtered_resps``; lm-eval's ``task_hashes``; the
   data files' digests against the files the task read here.
2. **Recomputed** (``recompute``) from the logged loglikelihoods on the rebuilt requests:
   each document's accuracies under every rule, each metric's mean and standard error
   (lm-eval's ``mean``/``mean_stderr``), each group's mean over its tasks (every member
   present).
3. **Refused outright**: a value that is not finite or out of its range; a run of lm-eval's
   dummy model that names a real one; an embedded model whose recorded file digest is not
   the installed file's; a version or premise digest other than the installed task's.

Every difference is a ``Finding`` naming the file, task and what differs; the command
exits 1 when there is any. What no recompute can catch (another model's genuine run,
relabelled) is ``rescore``'s job: ``dcpmi verify --rescore N``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.leaderboard.identity import (
    EMBEDDED_ID,
    RANDOM_MODELS,
    installed_embedded_sha256,
)
from lm_eval_dcpmi.leaderboard.rebuild import RebuiltTask, build_options, rebuild_task
from lm_eval_dcpmi.leaderboard.recompute import (
    Finding,
    TokenCounts,
    close,
    mean_stderr,
    number,
    score_documents,
    task_samples,
)
from lm_eval_dcpmi.leaderboard.rescore import (
    RescoreOptions,
    TaskToRescore,
    logged_loglikelihoods,
    rescore,
)
from lm_eval_dcpmi.leaderboard.submission import (
    Submission,
    TaskEntry,
    installed_task,
    read_submission,
    results_files,
)
from lm_eval_dcpmi.report.results import ReportError
from lm_eval_dcpmi.report.samples import HASH_FIELDS, request_pairs, task_hash
from lm_eval_dcpmi.rules import scoring

# Beyond this many documents with the same kind of difference, one line counts the rest.
SHOWN = 5


@dataclass(frozen=True)
class VerifyOptions:
    tokenizer: str | None = None  # counts acc_avg's tokens when the model is not at hand
    data_dir: str | None = None  # the data folder (default $DCPMI_DATA_DIR)
    include_path: tuple[str, ...] = ()  # folders of task YAMLs that are not installed
    installed: bool = True  # compare versions and premises with the installed tasks
    rescore: RescoreOptions | None = None  # score documents again with the named model


@dataclass
class Checked:
    """What ``verify`` rebuilt and recomputed of one results file."""

    path: Path
    tasks: dict[str, dict[str, float]] = field(default_factory=dict)  # task -> metric -> mean
    documents: dict[str, int] = field(default_factory=dict)  # task -> documents recomputed
    split: dict[str, int] = field(default_factory=dict)  # task -> documents in its split
    notes: list[str] = field(default_factory=list)
    to_rescore: list[TaskToRescore] = field(default_factory=list)
    rescored: list[str] = field(default_factory=list)  # what --rescore covered


def verify(
    paths: Sequence[Path], options: VerifyOptions | None = None
) -> tuple[list[Checked], list[Finding]]:
    """Rebuild and recompute every results file of ``paths`` (files or folders); returns
    what was checked and every difference found (see the module's docstring)."""
    options = options or VerifyOptions()
    if options.data_dir is not None and not Path(options.data_dir).is_dir():
        raise DCPMIError(
            f"--data_dir {options.data_dir}: no such folder; give the folder that holds the "
            "evaluation files (laid out as <dataset>/<file>), or leave it out to use "
            "$DCPMI_DATA_DIR."
        )
    checked, findings = [], []
    for path in results_files(paths):
        submission = read_submission(path)
        result, found = verify_submission(submission, options)
        checked.append(result)
        findings += found
        if options.rescore is not None and result.to_rescore:
            lines, found = rescore(submission, result.to_rescore, options.rescore)
            result.rescored += lines
            findings += found
    return checked, findings


def verify_submission(
    submission: Submission, options: VerifyOptions | None = None
) -> tuple[Checked, list[Finding]]:
    options = options or VerifyOptions()
    checked = Checked(submission.path)
    findings = model_findings(submission) + value_findings(submission)
    counts = TokenCounts(submission, options.tokenizer)
    for task in submission.tasks.values():
        if not task.is_group:
            findings += verify_task(submission, task, counts, options, checked)
            findings += _installed(submission, task, options, checked.notes)
    for group in (t for t in submission.tasks.values() if t.is_group):
        findings += _group(submission, group, checked)
    return checked, findings


# ---------------------------------------------------------------- the model and the values


def model_findings(submission: Submission) -> list[Finding]:
    """A results file whose model cannot have made its numbers under the name it gives."""
    found = []
    where = str(submission.path)
    config = (
        submission.data.get("config") if isinstance(submission.data.get("config"), dict) else {}
    )
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


def _range_problem(metric: scoring.Metric, stderr: bool, value: Any) -> str | None:
    if stderr:
        if value == "N/A":
            return None
        x = number(value)
        return None if math.isfinite(x) and x >= 0 else "is not a standard error"
    x = number(value)
    if not math.isfinite(x):
        return "is not a finite number"
    if metric.kind == "accuracy" and not 0 <= x <= 1:
        return "is not an accuracy (a number from 0 to 1)"
    if metric.kind == "count" and (x < 0 or x != int(x)):
        return "is not a count (a whole number, 0 or more)"
    return None


def value_findings(submission: Submission) -> list[Finding]:
    """Every value of the DC-PMI tasks' results entries that is not finite or not in its
    metric's range (a NaN or infinite accuracy is never passed on)."""
    found = []
    for name in submission.tasks:
        entry = submission.data["results"].get(name) or {}
        for key, value in entry.items():
            metric_name, _comma, _filter = str(key).partition(",")
            stderr = metric_name.endswith("_stderr")
            metric = scoring.metric_named(metric_name.removesuffix("_stderr"))
            if metric is None:
                continue
            problem = _range_problem(metric, stderr, value)
            if problem:
                found.append(Finding(f"{submission.path} ({name}, {key})", f"{value!r} {problem}"))
    return found


# ---------------------------------------------------------------- one task


def verify_task(
    submission: Submission,
    task: TaskEntry,
    counts: TokenCounts,
    options: VerifyOptions,
    checked: Checked,
) -> list[Finding]:
    """Rebuild, compare and recompute one task (see the module's docstring)."""
    results_where = f"{submission.path} ({task.name})"
    if task.samples_file is None:
        return [
            Finding(
                results_where, "no samples file beside the results file; rerun with --log_samples"
            )
        ]
    where = f"{task.samples_file} ({task.name})"
    try:
        samples = task_samples(task.samples_file, where)
    except ReportError as error:
        return [Finding(where, str(error).removeprefix(f"{where}: "))]
    ids, findings = document_ids(samples, where)
    samples = [s for s in samples if _is_index(s.get("doc_id"))]
    try:
        rebuilt = rebuild_task(
            task.name,
            submission.tokenizer_args(options.tokenizer),
            build_options(submission.data, task.name, lambda: counts.counter().tokenizer),
            sorted(set(ids)),
            options.data_dir,
            options.include_path,
        )
    except DCPMIError as error:
        return [*findings, Finding(results_where, f"cannot be built again here: {error}")]
    checked.split[task.name] = rebuilt.documents
    findings += data_findings(task, rebuilt, results_where)
    findings += split_findings(submission, task, rebuilt, ids, results_where)
    findings += document_findings(samples, rebuilt, where)
    findings += hash_findings(submission, task, samples, rebuilt, results_where)
    # the recompute scores the requests built from the data, never the logged strings
    by_id = sorted(samples, key=lambda s: int(s["doc_id"]))
    rebuilt_samples = [
        {**s, "arguments": rebuilt.by_id[int(s["doc_id"])].arguments}
        for s in by_id
        if len(rebuilt.by_id[int(s["doc_id"])].arguments) == len(s["filtered_resps"])
    ]
    if len(rebuilt_samples) != len(by_id) or len(set(ids)) != len(ids):
        return findings  # the documents are not those of one run (named above)
    scored, found = score_documents(task, rebuilt_samples, counts, where)
    findings += _first(found)
    if not scored:
        return findings
    means: dict[str, float] = {}
    for metric in scored[0].values:
        values = [d.values[metric] for d in scored]
        means[metric] = math.fsum(values) / len(values)
        row = scoring.metric_named(metric)
        # a corpus rule's decisions depend on each other: the mean's stderr does not apply
        stderr = math.nan if row is not None and row.corpus is not None else mean_stderr(values)
        findings += _against_results(submission, task, metric, means[metric], stderr)
    checked.tasks[task.name] = means
    checked.documents[task.name] = len(scored)
    if options.rescore is not None:
        checked.to_rescore.append(
            TaskToRescore(
                task.name,
                where,
                {int(s["doc_id"]): s["arguments"] for s in rebuilt_samples},
                {int(s["doc_id"]): logged_loglikelihoods(s) for s in rebuilt_samples},
            )
        )
    return findings


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def document_ids(samples: Sequence[dict[str, Any]], where: str) -> tuple[list[int], list[Finding]]:
    """The logged documents' indices (those that are indices); findings for one that is not
    a whole number 0 or more, or logged twice."""
    ids, seen, findings = [], set(), []
    for line, sample in enumerate(samples, start=1):
        value = sample.get("doc_id")
        if not _is_index(value):
            findings.append(
                Finding(where, f"sample {line}: doc_id {value!r} is not a document index")
            )
            continue
        if value in seen:
            findings.append(Finding(where, f"doc {value} is logged twice"))
        seen.add(value)
        ids.append(value)
    return ids, _first(findings)


def data_findings(task: TaskEntry, rebuilt: RebuiltTask, where: str) -> list[Finding]:
    """The data digests the run recorded against those of the files the task read here."""
    recorded = task.data_files
    if rebuilt.data_files and not recorded:
        return [
            Finding(
                where,
                "records no data digests"
                + (" (an empty data_files map)" if recorded == {} else "")
                + f", but the task reads {', '.join(sorted(rebuilt.data_files))}; rerun it to "
                "record them",
            )
        ]
    found = []
    for file, digest in sorted(rebuilt.data_files.items()):
        if (recorded or {}).get(file) != digest:
            logged = (recorded or {}).get(file)
            found.append(
                Finding(
                    where,
                    f"data file {file}: the file here has sha256 {digest[:16]}..., but the run "
                    + (
                        f"read {logged[:16]}...: other data"
                        if logged
                        else "recorded no digest of it"
                    ),
                )
            )
    for file in sorted(set(recorded or {}) - set(rebuilt.data_files)):
        found.append(Finding(where, f"records data file {file}, which the task here does not read"))
    return found


def _expected_ids(submission: Submission, documents: int) -> tuple[list[int], str] | None:
    """The documents the run was asked to score, where its results file says: a shard, a
    ``--limit`` prefix, else (a whole run) every one; None for a ``--samples`` selection."""
    from lm_eval_dcpmi.command.quick_look import prefix_size
    from lm_eval_dcpmi.command.shards import Shard

    block = submission.data.get("dcpmi") if isinstance(submission.data.get("dcpmi"), dict) else {}
    shard = block.get("shard")
    if isinstance(shard, dict):
        try:
            one = Shard(int(shard["index"]), int(shard["count"]))
        except (KeyError, TypeError, ValueError):
            return None
        return one.indices(documents), f"shard {one}"
    limit = number(submission.limit)
    if math.isfinite(limit) and limit > 0:
        return list(range(prefix_size(documents, limit))), f"the --limit {submission.limit} prefix"
    return None


def split_findings(
    submission: Submission, task: TaskEntry, rebuilt: RebuiltTask, ids: list[int], where: str
) -> list[Finding]:
    """The recorded counts against the split built from the data and the logged documents."""
    found = []
    if task.n_total is not None and task.n_total != rebuilt.documents:
        found.append(
            Finding(
                where,
                f"records a split of {task.n_total} documents (n-samples original), but the "
                f"split built from the data has {rebuilt.documents}",
            )
        )
    if task.n is not None and task.n != len(ids):
        found.append(
            Finding(
                where,
                f"records {task.n} documents scored (n-samples effective), but its samples log "
                f"{len(ids)}",
            )
        )
    expected = _expected_ids(submission, rebuilt.documents)
    if expected is None and task.n is not None and task.n == task.n_total:
        expected = list(range(rebuilt.documents)), "the whole split"
    if expected is not None and sorted(ids) != expected[0]:
        wanted, what = expected
        missing = sorted(set(wanted) - set(ids))
        extra = sorted(set(ids) - set(wanted))
        found.append(
            Finding(
                where,
                f"the samples log {len(ids)} documents, but {what} is {len(wanted)}"
                + (f"; missing {_few(missing)}" if missing else "")
                + (f"; not in it {_few(extra)}" if extra else ""),
            )
        )
    return found


def _few(ids: Sequence[int]) -> str:
    shown = ", ".join(map(str, ids[:3]))
    return f"doc {shown}" + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _short(text: str, most: int = 60) -> str:
    return repr(text if len(text) <= most else text[: most - 3] + "...")


def _request_difference(logged: list[tuple[str, str]], built: list[tuple[str, str]]) -> str | None:
    if len(logged) != len(built):
        return f"logs {len(logged)} requests, but the task built from the data makes {len(built)}"
    for index, (one, other) in enumerate(zip(logged, built, strict=True)):
        for part, a, b in (("context", one[0], other[0]), ("continuation", one[1], other[1])):
            if a != b:
                return (
                    f"request {index}'s {part} is {_short(a)}, but the task built from the data "
                    f"gives {_short(b)}"
                )
    return None


def _response_pair(value: Any) -> list[str]:
    """An answer (loglikelihood, is greedy) as text: JSONL logs its numbers as strings."""
    return [str(item) for item in value] if isinstance(value, (list, tuple)) else [str(value)]


def document_findings(
    samples: Sequence[dict[str, Any]], rebuilt: RebuiltTask, where: str
) -> list[Finding]:
    """Each logged document against the one built from the data (see the module's
    docstring); each kind of difference shown for the first ``SHOWN`` documents."""
    from lm_eval_dcpmi.harness.requests import doc_hash

    kinds: dict[str, list[Finding]] = {}

    def add(kind: str, doc_id: int, what: str) -> None:
        kinds.setdefault(kind, []).append(Finding(where, f"doc {doc_id}: {what}"))

    for sample in samples:
        doc_id = int(sample["doc_id"])
        built = rebuilt.by_id[doc_id]
        if sample.get("arguments"):
            difference = _request_difference(request_pairs(sample["arguments"]), built.arguments)
            if difference:
                add("requests", doc_id, difference)
        elif len(sample["filtered_resps"]) != len(built.arguments):
            add(
                "requests",
                doc_id,
                f"logs {len(sample['filtered_resps'])} loglikelihoods, but the task built from "
                f"the data makes {len(built.arguments)} requests",
            )
        if str(sample.get("target")) != str(built.target):
            add(
                "target",
                doc_id,
                f"logs target {sample.get('target')!r}, but the data give {built.target!r}",
            )
        hashes = built.hashes
        for name in HASH_FIELDS:
            if isinstance(sample.get(name), str) and sample[name] != hashes[name]:
                add(name, doc_id, f"its {name} is not that of what the data give")
        if "doc" in sample and isinstance(sample.get("doc_hash"), str):
            if doc_hash(sample["doc"]) != sample["doc_hash"]:
                add("doc", doc_id, "its logged doc does not hash to its doc_hash (edited)")
        resps = sample.get("resps")
        if isinstance(resps, list):
            filtered = sample["filtered_resps"]
            for index, (raw, kept) in enumerate(zip(resps, filtered, strict=False)):
                # resps: each repeat's answer (one); filtered_resps: the answer kept
                first = raw[0] if isinstance(raw, list) and raw else raw
                if _response_pair(first) != _response_pair(kept):
                    add(
                        "resps",
                        doc_id,
                        f"request {index}'s filtered_resps {kept!r} differ from its resps "
                        f"{raw!r} (lm-eval's multiple choice filters nothing)",
                    )
                    break
            if len(resps) != len(filtered):
                add("resps", doc_id, f"{len(resps)} resps for {len(filtered)} filtered_resps")
    found = []
    for items in kinds.values():
        found += _first(items)
    return found


def _first(findings: list[Finding]) -> list[Finding]:
    """The first ``SHOWN`` findings, and one that counts the rest."""
    if len(findings) <= SHOWN:
        return findings
    rest = len(findings) - SHOWN
    return [*findings[:SHOWN], Finding(findings[SHOWN].where, f"and {rest} more like these")]


def hash_findings(
    submission: Submission,
    task: TaskEntry,
    samples: Sequence[dict[str, Any]],
    rebuilt: RebuiltTask,
    where: str,
) -> list[Finding]:
    """lm-eval's ``task_hashes`` against the hashes of what the data give, in the samples'
    order (and against the samples' own, where they log them)."""
    recorded = submission.task_hashes.get(task.name)
    if not recorded:
        return []
    built = [rebuilt.by_id[int(s["doc_id"])].hashes for s in samples]
    found = []
    if task_hash(built) != recorded:
        found.append(
            Finding(
                where,
                "lm-eval's task_hashes in the results file is not the hash of the documents, "
                "prompts and targets built from the data",
            )
        )
    own = task_hash(samples)
    if own is not None and own != recorded:
        found.append(
            Finding(
                where,
                "lm-eval's task_hashes in the results file do not match the samples' hashes: "
                "the samples are another run's (or edited)",
            )
        )
    return found


def _against_results(
    submission: Submission, task: TaskEntry, metric: str, mean: float, stderr: float
) -> list[Finding]:
    where = f"{submission.path} ({task.name}, {metric})"
    if metric not in task.values:
        reported = (submission.data["results"].get(task.name) or {}).get(f"{metric},none")
        if reported is not None:
            return []  # not a finite number: value_findings said so
        return [
            Finding(
                where, "the results file does not report it, though the task's samples decide it"
            )
        ]
    found = []
    reported = task.values[metric]
    if not close(mean, reported):
        found.append(
            Finding(where, f"reports {reported!r}; the logged loglikelihoods give {mean!r}")
        )
    reported_stderr = task.stderr.get(metric)
    if (
        reported_stderr is not None
        and not math.isnan(stderr)
        and not close(stderr, reported_stderr)
    ):
        found.append(
            Finding(
                where,
                f"reports standard error {reported_stderr!r}; the "
                f"recomputed documents give {stderr!r}",
            )
        )
    return found


def _group(submission: Submission, group: TaskEntry, checked: Checked) -> list[Finding]:
    where = f"{submission.path} ({group.name})"
    missing = [t for t in group.subtasks if t not in submission.data["results"]]
    if missing:
        return [
            Finding(
                where,
                f"lists {_names(missing)} as members, but the results file holds no such "
                "task: its mean is not over its members",
            )
        ]
    found = []
    for metric, reported in group.values.items():
        members = [checked.tasks.get(t, {}).get(metric) for t in group.subtasks]
        if not members or any(v is None for v in members):
            continue
        mean = math.fsum(members) / len(members)  # type: ignore[arg-type]
        if not close(mean, reported):
            found.append(
                Finding(
                    f"{submission.path} ({group.name}, {metric})",
                    f"the group reports {reported!r}; the mean of its {len(members)} tasks' "
                    f"recomputed values is {mean!r}",
                )
            )
    return found


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _installed(
    submission: Submission, task: TaskEntry, options: VerifyOptions, notes: list[str]
) -> list[Finding]:
    if not options.installed:
        return []
    where = f"{submission.path} ({task.name})"
    here = installed_task(task.name)
    if here is None:
        notes.append(f"{task.name}: not an installed task; its version is not compared")
        return []
    found = []
    if task.premise_sha256 is not None and task.premise_sha256 != here.premise_sha256:
        found.append(
            Finding(
                where,
                "its premise_sha256 differs from the installed "
                f"task's ({here.premise_sha256[:8]}): another domain "
                "premise or reference contexts were scored",
            )
        )
    if task.version and here.version and task.version != here.version:
        found.append(
            Finding(
                where, f"version {task.version} differs from the installed task's {here.version}"
            )
        )
    return found


def summary(checked: Iterable[Checked]) -> list[str]:
    """One line per task rebuilt and recomputed."""
    lines = []
    for result in checked:
        for task, means in result.tasks.items():
            shown = ", ".join(f"{m} {100 * v:.1f}" for m, v in means.items() if not math.isnan(v))
            n, split = result.documents[task], result.split.get(task)
            of = f" of {split}" if split is not None and split != n else ""
            lines.append(f"{task}: {n}{of} documents rebuilt and recomputed ({shown})")
    return lines
