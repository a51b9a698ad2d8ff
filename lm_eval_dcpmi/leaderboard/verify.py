"""``dcpmi verify RESULTS...``: recompute a submission from its logged loglikelihoods.

For every DC-PMI task of a results file, from the samples file beside it:

1. each document's accuracies under every rule the task reports, from the logged
   loglikelihoods (``filtered_resps``) cut into the task's request blocks, the options'
   characters, and their token counts (the model's tokenizer, as the run counted them);
   BC from every document's probabilities; against the per-document values logged;
2. each accuracy's mean and standard error (lm-eval's ``mean``/``mean_stderr``) against
   the results file, and each group's mean over its tasks;
3. lm-eval's ``task_hashes`` against the samples' per-document hashes (the samples are this
   run's), the task's version and ``premise_sha256`` against the installed task, and the
   data files' sha256 against the files at hand.

Every difference is a ``Finding`` naming the file, task and metric; ``verify`` returns them
all, and the command exits 1 when there is any.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.leaderboard.submission import (
    Submission,
    TaskEntry,
    installed_task,
    read_submission,
)
from lm_eval_dcpmi.report.results import ReportError
from lm_eval_dcpmi.report.samples import (
    DocumentOptions,
    document_options,
    read_samples,
    task_hash,
    task_layout,
)
from lm_eval_dcpmi.rules import scoring
from lm_eval_dcpmi.rules.scoring import DocumentScores

# Two floats count as equal within this relative difference (JSON round trips, summation
# order): far below one document's weight in any split (1/56 for CB).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Finding:
    """One difference between a submission and its recompute."""

    where: str  # the file (and task, metric)
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Checked:
    """What ``verify`` recomputed of one results file."""

    path: Path
    tasks: dict[str, dict[str, float]]  # task -> metric -> recomputed mean
    documents: dict[str, int]  # task -> documents recomputed
    notes: list[str]


def close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def mean_stderr(values: Sequence[float]) -> float:
    """lm-eval's ``mean_stderr``: the sample standard deviation over sqrt(n)."""
    n = len(values)
    if n < 2:
        return math.nan
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class TokenCounts:
    """Option token counts as the run counted them, with the submission's tokenizer."""

    def __init__(self, submission: Submission, tokenizer: str | None) -> None:
        self.submission = submission
        self.tokenizer = tokenizer
        self._counter: Any = None

    def counter(self) -> Any:
        if self._counter is None:
            from lm_eval_dcpmi.tasks.tokens import counter_for_metadata

            args = self.submission.tokenizer_args(self.tokenizer)
            try:
                self._counter = counter_for_metadata(args)
            except DCPMIError as error:
                raise DCPMIError(
                    f"{self.submission.path}: acc_avg needs the model's tokenizer to count "
                    f"option tokens, and it could not be loaded ({error}); give --tokenizer "
                    "with a loadable tokenizer (a hub id or a folder)."
                ) from None
            if self._counter is None:
                raise DCPMIError(
                    f"{self.submission.path}: the results name no tokenizer to count acc_avg's "
                    "option tokens with; give --tokenizer (a hub id or a folder)."
                )
        return self._counter


def verify(
    paths: Sequence[Path],
    tokenizer: str | None = None,
    data_dir: str | None = None,
    installed: bool = True,
) -> tuple[list[Checked], list[Finding]]:
    """Recompute every results file of ``paths`` (files or folders); returns what was
    checked and every difference found (see the module's docstring). ``installed``:
    compare versions and premises with the installed tasks."""
    checked, findings = [], []
    for submission in read_submission_paths(paths):
        result, found = verify_submission(submission, tokenizer, data_dir, installed)
        checked.append(result)
        findings += found
    return checked, findings


def read_submission_paths(paths: Sequence[Path]) -> list[Submission]:
    from lm_eval_dcpmi.leaderboard.submission import results_files

    return [read_submission(path) for path in results_files(paths)]


def verify_submission(
    submission: Submission,
    tokenizer: str | None = None,
    data_dir: str | None = None,
    installed: bool = True,
) -> tuple[Checked, list[Finding]]:
    findings: list[Finding] = []
    counts = TokenCounts(submission, tokenizer)
    checked = Checked(submission.path, {}, {}, [])
    for task in submission.tasks.values():
        if task.is_group:
            continue
        where = f"{submission.path} ({task.name})"
        recomputed, n, found = _recompute_task(submission, task, counts, where)
        findings += found
        checked.tasks[task.name] = recomputed
        checked.documents[task.name] = n
        findings += _provenance(submission, task, where, data_dir, installed, checked.notes)
    for group in (t for t in submission.tasks.values() if t.is_group):
        findings += _group(submission, group, checked)
    return checked, findings


@dataclass
class ScoredDocument:
    """One logged document, decided again from its loglikelihoods."""

    sample: dict[str, Any]
    options: DocumentOptions
    values: dict[str, float]  # accuracy metric -> 1.0/0.0 (a corpus rule's: over the task)
    picks: dict[str, int | None]  # accuracy metric -> the option it picks
    scores: DocumentScores  # what the rules decided it from


def score_task(task: TaskEntry, counts: TokenCounts) -> tuple[list[ScoredDocument], list[Finding]]:
    """Every logged document of ``task`` decided again (see the module's docstring); with
    what keeps it from being recomputed, or differs from what was logged, as findings."""
    if task.samples_file is None:
        return [], [
            Finding(
                f"{task.name}", "no samples file beside the results file; rerun with --log_samples"
            )
        ]
    where = f"{task.samples_file} ({task.name})"
    try:
        samples = [s for s in read_samples(task.samples_file) if s.get("filter", "none") == "none"]
    except ReportError as error:
        return [], [Finding(where, str(error))]
    samples.sort(key=lambda s: int(s["doc_id"]))
    if any(not s.get("filtered_resps") or not s.get("arguments") for s in samples):
        return [], [
            Finding(
                where,
                "the samples hold no loglikelihoods (trimmed?); this needs the "
                "samples files lm-eval wrote with --log_samples",
            )
        ]
    layout = task_layout(task.config)
    metrics = scoring.task_metrics(layout.references, bool(layout.content_free))
    accuracies = [m for m in metrics if m.kind == "accuracy"]
    delimiter = task.config.get("target_delimiter", " ")
    try:
        documents = [document_options(s, where, layout) for s in samples]
    except ReportError as error:
        return [], [Finding(where, str(error))]
    content_free = next((d.content_free for d in documents if d.content_free), None)
    counter = counts.counter() if any(m.needs_tokenizer for m in accuracies) else None
    findings, scored = [], []
    for sample, doc in zip(samples, documents, strict=True):
        if doc.gold is None:
            findings.append(Finding(where, f"doc {doc.doc_id}: its target names no option"))
            continue
        pairs = list(zip(doc.contexts, doc.options, strict=True))
        n_tokens = [counter.split(c, o)[1] for c, o in pairs] if counter is not None else None
        n_chars = [
            len(o) - len(delimiter) if o.startswith(delimiter) else len(o) for o in doc.options
        ]
        scores = DocumentScores(doc.conditional, doc.references, n_tokens, n_chars, content_free)
        values = scoring.accuracies(scores, doc.gold, accuracies)
        values.pop(scoring.UNRANKED, None)
        picks = scoring.predictions(scores, accuracies)
        scored.append(ScoredDocument(sample, doc, values, picks, scores))
    corpus = {m.name: m.corpus for m in accuracies if m.corpus is not None}
    for name, rule in corpus.items() if scored else []:
        items = [rule.item(d.scores, d.options.gold) for d in scored]
        for doc, pick in zip(scored, rule.picks(items), strict=True):
            doc.picks[name] = pick
            doc.values[name] = float(pick is not None and pick == doc.options.gold)
    for doc in scored:
        for metric, value in doc.values.items():
            if metric in corpus:
                continue  # logged as the document's item, decided over the task
            logged = _number(doc.sample.get(metric))
            if not close(value, logged):
                findings.append(
                    Finding(
                        where,
                        f"doc {doc.options.doc_id}: {metric} recomputes to {value:g} from "
                        "the logged loglikelihoods, but the sample logs "
                        f"{doc.sample.get(metric)!r}",
                    )
                )
    return scored, findings


def _recompute_task(
    submission: Submission, task: TaskEntry, counts: TokenCounts, where: str
) -> tuple[dict[str, float], int, list[Finding]]:
    scored, findings = score_task(task, counts)
    if not scored:
        return {}, 0, [Finding(where, f.what) if f.where == task.name else f for f in findings]
    recorded = submission.task_hashes.get(task.name)
    computed = task_hash(read_samples(task.samples_file)) if task.samples_file else None
    if recorded and computed and recorded != computed:
        findings.append(
            Finding(
                where,
                "lm-eval's task_hashes in the results file do not match "
                "the samples' hashes: the samples are another run's (or edited)",
            )
        )
    means: dict[str, float] = {}
    for metric in scored[0].values:
        values = [d.values[metric] for d in scored]
        means[metric] = sum(values) / len(values)
        row = scoring.metric_named(metric)
        # a corpus rule's decisions depend on each other: the mean's stderr does not apply
        stderr = math.nan if row is not None and row.corpus is not None else mean_stderr(values)
        findings += _against_results(submission, task, metric, means[metric], stderr)
    if task.n is not None and task.n != len(scored):
        findings.append(
            Finding(
                where,
                f"{len(scored)} documents in the samples, but the results file reports n={task.n}",
            )
        )
    return means, len(scored), findings


def _against_results(
    submission: Submission, task: TaskEntry, metric: str, mean: float, stderr: float
) -> list[Finding]:
    where = f"{submission.path} ({task.name}, {metric})"
    if metric not in task.values:
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
    found = []
    for metric, reported in group.values.items():
        members = [checked.tasks.get(t, {}).get(metric) for t in group.subtasks]
        if not members or any(v is None for v in members):
            continue
        mean = sum(members) / len(members)  # type: ignore[arg-type]
        if not close(mean, reported):
            found.append(
                Finding(
                    f"{submission.path} ({group.name}, {metric})",
                    f"the group reports {reported!r}; the mean of its {len(members)} tasks' "
                    f"recomputed values is {mean!r}",
                )
            )
    return found


def _provenance(
    submission: Submission,
    task: TaskEntry,
    where: str,
    data_dir: str | None,
    installed: bool,
    notes: list[str],
) -> list[Finding]:
    found = []
    if installed:
        here = installed_task(task.name)
        if here is None:
            notes.append(f"{task.name}: not an installed task; its version is not compared")
        else:
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
                        where,
                        f"version {task.version} differs from the installed task's {here.version}",
                    )
                )
    if task.data_files is None:
        found.append(
            Finding(
                where,
                "the results record no data digests (made before the "
                "plugin recorded them); rerun to verify the data",
            )
        )
        return found
    from lm_eval_dcpmi.data.digests import sha256_of
    from lm_eval_dcpmi.data.loaders import locate

    root = data_dir or task.config.get("metadata", {}).get("data_dir")
    for file, digest in task.data_files.items():
        try:
            path = locate(file, root if root and os.path.isdir(str(root)) else None, folder=None)
        except DCPMIError as error:
            found.append(Finding(where, f"data file {file}: {error}"))
            continue
        if sha256_of(path) != digest:
            found.append(
                Finding(
                    where,
                    f"data file {file} ({path}) has sha256 "
                    f"{sha256_of(path)[:16]}..., but the run read "
                    f"{digest[:16]}...: other data",
                )
            )
    return found


def summary(checked: Iterable[Checked]) -> list[str]:
    """One line per task recomputed."""
    lines = []
    for result in checked:
        for task, means in result.tasks.items():
            shown = ", ".join(f"{m} {100 * v:.1f}" for m, v in means.items() if not math.isnan(v))
            lines.append(f"{task}: {result.documents[task]} documents recomputed ({shown})")
    return lines
