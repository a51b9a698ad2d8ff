"""``dcpmi verify RESULTS...``: rebuild what a submission scored, and recompute its numbers.

A submission is trusted for nothing that can be rebuilt. For every DC-PMI task of a
results file, with the samples file beside it:

1. **Rebuilt from the data** (``_rebuild``: the installed task, the data files at hand, the
   run's few-shot and prompt settings): the split's size against the recorded counts; the
   logged document indices (whole numbers, each once, the range the run covered: whole
   split, ``--limit`` prefix or ``--shard``); each document's requests (context and
   continuation, domain premise and CC's content-free ones too), target and lm-eval's
   three hashes; ``resps`` against ``filtered_resps``; lm-eval's ``task_hashes``; the
   data files' digests against the files the task read here.
2. **Recomputed** (``_recompute``) from the logged loglikelihoods on the rebuilt requests:
   each document's accuracies under every rule, each metric's mean and standard error
   (lm-eval's ``mean``/``mean_stderr``), each group's mean over its tasks (every member
   present).
3. **Refused outright**: a value that is not finite or out of its range; a run of lm-eval's
   dummy model that names a real one; an embedded model whose recorded file digest is not
   the installed file's; a version or premise digest other than the installed task's.

Every difference is a ``Finding`` naming the file, task and what differs; the command
exits 1 when there is any. What no recompute can catch (another model's genuine run,
relabelled) is ``_rescore``'s job: ``dcpmi verify --rescore N``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import ReportError
from lm_eval_dcpmi.rules import COUNTS, MEASURES, listed_metrics, metric_named
from lm_eval_dcpmi.task import derived_label, derived_rule
from lm_eval_dcpmi.verification._against_data import (
    data_findings,
    document_findings,
    document_ids,
    first_few,
    hash_findings,
    is_index,
    premise_findings,
    recorded_digest_findings,
    split_findings,
    version_findings,
)
from lm_eval_dcpmi.verification._rebuild import build_options, rebuild_task
from lm_eval_dcpmi.verification._recompute import (
    Finding,
    TokenCounts,
    close_enough,
    logged_number,
    mean_stderr,
    score_documents,
    task_samples,
)
from lm_eval_dcpmi.verification._refusals import model_findings, value_findings
from lm_eval_dcpmi.verification._rescore import (
    RescoreOptions,
    TaskToRescore,
    logged_loglikelihoods,
    rescore,
)
from lm_eval_dcpmi.verification._submission import (
    Submission,
    TaskEntry,
    installed_task,
    read_submission,
    results_files,
)


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
    derived: dict[str, str] = field(default_factory=dict)  # task -> its premise's rule
    notes: list[str] = field(default_factory=list)
    to_rescore: list[TaskToRescore] = field(default_factory=list)
    rescored: list[str] = field(default_factory=list)  # what --rescore covered
    # task -> doc_id -> metric -> the value recomputed from the logged loglikelihoods
    per_document: dict[str, dict[int, dict[str, float]]] = field(default_factory=dict)


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
    findings += [
        Finding(
            f"{submission.path} ({name})",
            f"reports {metric}, a DC-PMI metric, but the file records no DC-PMI task or group "
            f"of that name (configs.{name}.metadata.domain_premise, or group_subtasks), so it "
            "cannot be built again and recomputed; no run writes such an entry (remove it)",
        )
        for name, metric in submission.unverifiable.items()
    ]
    counts = TokenCounts(submission, options.tokenizer)
    for task in submission.tasks.values():
        if not task.is_group:
            findings += verify_task(submission, task, counts, options, checked)
            findings += _installed(submission, task, options, checked.notes)
    for group in (t for t in submission.tasks.values() if t.is_group):
        findings += _group(submission, group, checked)
    return checked, findings


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
    samples = [s for s in samples if is_index(s.get("doc_id"))]
    try:
        rebuilt = rebuild_task(
            task.name,
            submission.tokenizer_args(options.tokenizer),
            build_options(submission.data, task.name, lambda: counts.counter().tokenizer),
            sorted(set(ids)),
            options.data_dir,
            options.include_path,
            task.metadata,
        )
    except DCPMIError as error:
        findings.append(Finding(results_where, f"cannot be built again here: {error}"))
        return findings + recorded_digest_findings(task, options.data_dir, results_where)
    checked.split[task.name] = rebuilt.documents
    rule = derived_rule(rebuilt.task.config.metadata)
    if rule is not None:  # as built here: premise_findings compares the record with it
        checked.derived[task.name] = rule
    findings += data_findings(task, rebuilt, results_where)
    findings += premise_findings(task, rebuilt, results_where)
    findings += version_findings(task, rebuilt, results_where)
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
    # each document's gold option and characters as the task decides them, from the data
    built = [rebuilt.by_id[int(s["doc_id"])] for s in rebuilt_samples]
    golds = {d.doc_id: d.gold for d in built}
    characters = {d.doc_id: [len(choice) for choice in d.choices] for d in built}
    scored, found = score_documents(
        task, rebuilt_samples, counts, where, golds=golds, characters=characters
    )
    findings += first_few(found)
    if not scored:
        return findings
    means: dict[str, float] = {}
    for metric in scored[0].values:
        values = [d.values[metric] for d in scored]
        if metric in COUNTS:  # summed, as lm-eval aggregates a count
            findings += _count_against_results(submission, task, metric, math.fsum(values))
            continue
        means[metric] = math.fsum(values) / len(values)
        row = metric_named(metric)
        # a corpus rule's decisions depend on each other: the mean's stderr does not apply
        stderr = math.nan if row is not None and row.corpus is not None else mean_stderr(values)
        findings += _against_results(submission, task, metric, means[metric], stderr)
    checked.tasks[task.name] = means
    checked.documents[task.name] = len(scored)
    checked.per_document[task.name] = {d.options.doc_id: d.values for d in scored}
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


def _against_results(
    submission: Submission, task: TaskEntry, metric: str, mean: float, stderr: float
) -> list[Finding]:
    where = f"{submission.path} ({task.name}, {metric})"
    values = task.measures if metric in MEASURES else task.values
    errors = task.measures_stderr if metric in MEASURES else task.stderr
    if metric not in values:
        reported = (submission.data["results"].get(task.name) or {}).get(f"{metric},none")
        if reported is not None:
            return []  # not a finite number: value_findings said so
        if metric in MEASURES:
            return _unreported(submission, task, metric)
        return [
            Finding(
                where, "the results file does not report it, though the task's samples decide it"
            )
        ]
    found = []
    reported = values[metric]
    if not close_enough(mean, reported):
        found.append(
            Finding(where, f"reports {reported!r}; the logged loglikelihoods give {mean!r}")
        )
    entry = submission.data["results"].get(task.name) or {}
    if f"{metric}_stderr,none" not in entry and not math.isnan(stderr):
        found.append(Finding(where, "reports no standard error (lm-eval writes one)"))
    if entry.get(f"{metric}_stderr,none") == "N/A" and not math.isnan(stderr):
        iters = submission.bootstrap_iters
        if iters is None or (isinstance(iters, int) and iters > 0):
            # lm-eval writes "N/A" for a mean only without bootstrapping or for one document
            found.append(
                Finding(
                    where,
                    'reports its standard error as "N/A", which lm-eval writes only for one '
                    "document or with --bootstrap_iters 0, but the run's config records "
                    + (f"bootstrap_iters {iters!r}" if iters is not None else "none")
                    + f"; the recomputed documents give {stderr!r}",
                )
            )
    reported_stderr = errors.get(metric)
    if (
        reported_stderr is not None
        and not math.isnan(stderr)
        and not close_enough(stderr, reported_stderr)
    ):
        found.append(
            Finding(
                where,
                f"reports standard error {reported_stderr!r}; the "
                f"recomputed documents give {stderr!r}",
            )
        )
    return found


def _unreported(submission: Submission, task: TaskEntry, metric: str) -> list[Finding]:
    """A count or measure the results lack: files written before it existed do (it
    describes, decides nothing), but one the task's recorded metric_list names was removed."""
    if metric not in listed_metrics(task.config):
        return []
    note = "is not reported, though the task's metric_list names it (lm-eval writes each)"
    return [Finding(f"{submission.path} ({task.name}, {metric})", note)]


def _count_against_results(
    submission: Submission, task: TaskEntry, metric: str, total: float
) -> list[Finding]:
    entry = submission.data["results"].get(task.name) or {}
    if f"{metric},none" not in entry:
        return _unreported(submission, task, metric)
    reported = logged_number(entry[f"{metric},none"])
    if math.isnan(reported) or close_enough(total, reported):
        return []  # not a number: value_findings said so
    where = f"{submission.path} ({task.name}, {metric})"
    return [Finding(where, f"reports {reported:g}; the logged documents give {total:g}")]


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
        if not close_enough(mean, reported):
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
        notes.append(
            f"{task.name}: not an installed task; its version is compared with the task "
            "built again from its record"
        )
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


def verify_summary(checked: Iterable[Checked]) -> list[str]:
    """One line per task rebuilt and recomputed."""
    lines = []
    for result in checked:
        for task, means in result.tasks.items():
            shown = ", ".join(
                f"{m} {v:.3f}" if m in MEASURES else f"{m} {100 * v:.1f}"
                for m, v in means.items()
                if not math.isnan(v)
            )
            n, split = result.documents[task], result.split.get(task)
            of = f" of {split}" if split is not None and split != n else ""
            rule = result.derived.get(task)
            under = f", {derived_label(rule)}" if rule is not None else ""
            lines.append(f"{task}: {n}{of} documents rebuilt and recomputed{under} ({shown})")
    return lines


def refuse_unverified(
    submissions: list,
    tokenizer: str | None,
    data_dir: str | None,
    include_path: tuple[str, ...] = (),
) -> None:
    """``dcpmi verify``'s every check on each submission first: export writes only numbers
    that the data and the logged loglikelihoods give (a ``DCPMIError`` naming the first
    difference otherwise); ``include_path``: folders of tasks not installed, as verify's."""
    if data_dir is not None and not Path(data_dir).is_dir():
        raise DCPMIError(
            f"--data_dir {data_dir}: no such folder; give the evaluation data's folder."
        )
    options = VerifyOptions(tokenizer, data_dir, include_path)
    for submission in submissions:
        _checked, findings = verify_submission(submission, options)
        if findings:
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise DCPMIError(
                f"{findings[0]}{more}; export writes only what dcpmi verify passes (it lists "
                "every difference)."
            )
