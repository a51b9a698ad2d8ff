"""Every logged document of a DC-PMI task decided again from its loglikelihoods.

``score_documents`` takes a task's samples (each with its requests' ``arguments``, in the
blocks of ``rules._layout``, and their ``filtered_resps``) and decides each document again
under every rule the task reports: the options' characters, their token counts (the
model's tokenizer, as the run counted them), the content-free scores of the carrier, and
BC over every document. ``dcpmi verify``, ``dcpmi merge`` and ``dcpmi export`` all use it,
so a number is recomputed one way only.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import (
    DocumentOptions,
    ReportError,
    document_options,
    read_samples,
    request_pairs,
    task_layout,
)
from lm_eval_dcpmi.rules import (
    COUNTS,
    DOMAIN,
    MEASURES,
    TIED_DOMAIN,
    TRUNCATED,
    DocumentScores,
    accuracies,
    measures,
    predictions,
    task_metrics,
)
from lm_eval_dcpmi.verification._submission import Submission, TaskEntry

# Two floats count as equal within this relative difference (JSON round trips, summation
# order): far below one document's weight in any split (1/56 for CB).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Finding:
    """One difference between a submission and what is recomputed or rebuilt of it."""

    where: str  # the file (and task, metric)
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def close_enough(a: float, b: float) -> bool:
    """Equal within ``TOLERANCE``; a value that is not finite equals only itself."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def mean_stderr(values: Sequence[float]) -> float:
    """lm-eval's ``mean_stderr``: the sample standard deviation over sqrt(n)."""
    n = len(values)
    if n < 2:
        return math.nan
    # plain sums in lm-eval's order (lm_eval/api/metrics.py: mean, sample_stddev), so that a
    # recomputed standard error is lm-eval's to the last bit
    mean = sum(values) / n
    return math.sqrt(sum([(v - mean) ** 2 for v in values]) / (n - 1)) / math.sqrt(n)


def logged_number(value: Any) -> float:
    """A logged number (JSONL logs them as strings); NaN for anything else."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float
        return math.nan


class TokenCounts:
    """Option token counts as the run counted them, with the submission's tokenizer."""

    def __init__(self, submission: Submission, tokenizer: str | None) -> None:
        self.submission = submission
        self.tokenizer = tokenizer
        self._counter: Any = None

    def counter(self) -> Any:
        if self._counter is None:
            from lm_eval_dcpmi.task import counter_for_metadata

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


@dataclass
class ScoredDocument:
    """One logged document, decided again from its loglikelihoods."""

    sample: dict[str, Any]
    options: DocumentOptions
    values: dict[str, float]  # accuracy metric -> 1.0/0.0 (a corpus rule's: over the task)
    picks: dict[str, int | None]  # accuracy metric -> the option it picks
    scores: DocumentScores  # what the rules decided it from


def task_samples(path: Path, where: str) -> list[dict[str, Any]]:
    """A task's logged samples (lm-eval's one filter, ``none``), by document index; a
    ``ReportError`` naming ``where`` when they hold no loglikelihoods, or a sample under
    another filter (a multiple-choice task has none other)."""
    samples = read_samples(path)
    other = next((s.get("filter") for s in samples if s.get("filter", "none") != "none"), None)
    if other is not None:
        raise ReportError(
            f"{where}: a sample is logged under the filter {other!r}; a multiple-choice task "
            "has lm-eval's one filter, none, so no run of it wrote this"
        )
    if any(not s.get("filtered_resps") for s in samples):
        raise ReportError(
            f"{where}: the samples hold no loglikelihoods (trimmed?); this needs the samples "
            "files lm-eval wrote with --log_samples"
        )
    return samples


def score_documents(
    task: TaskEntry,
    samples: Sequence[dict[str, Any]],
    counts: TokenCounts,
    where: str,
    content_free: dict[str, list[float]] | None = None,
    golds: dict[int, int] | None = None,
    characters: dict[int, list[int]] | None = None,
) -> tuple[list[ScoredDocument], list[Finding]]:
    """Every sample of ``task`` (each with its ``arguments``) decided again; what keeps a
    document from being recomputed, or differs from what its sample logs, as findings.
    ``content_free``: the carrier's content-free scores to decide CC with (default: those
    of the carrier among ``samples``); ``golds``: each document's gold index as its task
    decides it (``dcpmi verify`` builds them again), else read off the sample's target;
    ``characters``: each document's options' characters as its task counts them (those of
    ``doc_to_choice``: the contexts, for several inputs), else the options' own."""
    layout = task_layout(task.config)
    metrics = task_metrics(layout.references, bool(layout.content_free))
    accuracy_metrics = [m for m in metrics if m.kind == "accuracy"]
    measure_metrics = [m for m in metrics if m.kind == "measure"]
    delimiter = task.config.get("target_delimiter", " ")
    if not isinstance(delimiter, str):  # the options' characters are counted after it
        return [], [Finding(where, f"its config's target_delimiter is {delimiter!r}, not text")]
    try:
        documents = [document_options(s, where, layout) for s in samples]
    except ReportError as error:
        return [], [Finding(where, str(error))]
    if golds is not None:
        documents = [dataclasses.replace(d, gold=golds.get(d.doc_id, d.gold)) for d in documents]
    if content_free is None:
        content_free = next((d.content_free for d in documents if d.content_free), None)
    counter = counts.counter() if any(m.needs_tokenizer for m in accuracy_metrics) else None
    findings, scored = [], []
    for sample, doc in zip(samples, documents, strict=True):
        if doc.gold is None:
            several = len(set(doc.options)) == 1 and len(set(doc.contexts)) > 1
            why = (
                " (a task of several inputs: its gold option is the document's doc_to_text, "
                "which dcpmi verify builds again from the data)"
                if several
                else ""
            )
            findings.append(Finding(where, f"doc {doc.doc_id}: its target names no option{why}"))
            continue
        pairs = list(zip(doc.contexts, doc.options, strict=True))
        n_tokens = [counter.split(c, o)[1] for c, o in pairs] if counter is not None else None
        n_chars = (characters or {}).get(doc.doc_id) or [
            len(o) - len(delimiter) if o.startswith(delimiter) else len(o) for o in doc.options
        ]
        try:
            scores = DocumentScores(
                doc.conditional, doc.references, n_tokens, n_chars, content_free
            )
        except ValueError as error:  # e.g. 2 options beside the carrier's 3 content-free
            findings.append(Finding(where, f"doc {doc.doc_id}: {error}: not this task's"))
            continue
        values = accuracies(scores, doc.gold, accuracy_metrics)
        values.update(measures(scores, measure_metrics))
        if counter is not None and sample.get("arguments"):
            values[TRUNCATED] = _truncated(counter, request_pairs(sample["arguments"]))
        if sample.get("arguments"):  # the domain requests: the conditional ones again?
            requests = request_pairs(sample["arguments"])
            tied = layout.tied(requests, len(doc.options), bool(doc.content_free))
            values[TIED_DOMAIN] = float(DOMAIN in tied)
        picks = predictions(scores, accuracy_metrics)
        scored.append(ScoredDocument(sample, doc, values, picks, scores))
    corpus = {m.name: m.corpus for m in accuracy_metrics if m.corpus is not None}
    for name, rule in corpus.items() if scored else []:
        items = [rule.item(d.scores, d.options.gold) for d in scored]
        findings += _item_findings(name, scored, items, where)
        for doc, pick in zip(scored, rule.picks(items), strict=True):
            doc.picks[name] = pick
            doc.values[name] = float(pick is not None and pick == doc.options.gold)
    for doc in scored:
        for metric, value in doc.values.items():
            if metric in corpus:
                continue  # logged as the document's item, decided over the task
            if metric not in doc.sample and metric in (*MEASURES, *COUNTS):
                continue  # describes, decides nothing: older runs did not log it
            logged = logged_number(doc.sample.get(metric))
            if not close_enough(value, logged):
                source = (
                    "its requests' token counts"
                    if metric == TRUNCATED
                    else "its requests"
                    if metric == TIED_DOMAIN
                    else "the logged loglikelihoods"
                )
                findings.append(
                    Finding(
                        where,
                        f"doc {doc.options.doc_id}: {metric} recomputes to {value:g} from "
                        f"{source}, but the sample logs {doc.sample.get(metric)!r}",
                    )
                )
    return scored, findings


def _truncated(counter: Any, requests: Sequence[tuple[str, str]]) -> float:
    """How many of a document's requests are longer than the model's window (the task
    counts them so, ``DCPMITask._document_scoring``)."""
    counts = [counter.split(context, option) for context, option in requests]
    return float(sum(n_ctx + n_cont > counter.max_length + 1 for n_ctx, n_cont in counts))


def _item_findings(
    name: str, scored: Sequence[ScoredDocument], items: Sequence[Sequence[float]], where: str
) -> list[Finding]:
    """Each document's logged item of the corpus rule ``name`` against the one its
    loglikelihoods give (the reports decide the rule from the logged items)."""
    found = []
    logging = any(doc.sample.get(name) is not None for doc in scored)
    for doc, item in zip(scored, items, strict=True):
        logged = doc.sample.get(name)
        if logged is None and logging:  # logged on other documents: a line was edited
            found.append(Finding(where, f"doc {doc.options.doc_id}: logs no {name}"))
        if logged is None:
            continue
        values = json.loads(logged) if isinstance(logged, str) else logged
        if len(values) != len(item) or not all(
            close_enough(a, logged_number(b)) for a, b in zip(item, values, strict=True)
        ):
            found.append(
                Finding(
                    where,
                    f"doc {doc.options.doc_id}: {name} logs the item {logged!r}, but the logged "
                    f"loglikelihoods give {[round(x, 6) for x in item]}",
                )
            )
    return found


def score_task(task: TaskEntry, counts: TokenCounts) -> tuple[list[ScoredDocument], list[Finding]]:
    """``score_documents`` on the samples file of ``task``, as its requests are logged
    there (``dcpmi verify`` checks them against the data first)."""
    if task.samples_file is None:
        return [], [
            Finding(task.name, "no samples file beside the results file; rerun with --log_samples")
        ]
    where = f"{task.samples_file} ({task.name})"
    try:
        samples = task_samples(task.samples_file, where)
    except ReportError as error:
        return [], [Finding(where, str(error).removeprefix(f"{where}: "))]
    if any(not s.get("arguments") for s in samples):
        return [], [Finding(where, "the samples log no requests (arguments); dcpmi verify "
                            "builds them again from the data")]  # fmt: skip
    samples.sort(key=lambda s: int(s["doc_id"]))
    return score_documents(task, samples, counts, where)
