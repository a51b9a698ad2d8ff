"""The decision rules of the DC-PMI paper and of the calibrations beside it, as one table.

A document's numbers are a ``DocumentScores``: log P(y_i | premise) for each option, the
same options' log-probabilities after each *reference context* (the paper's domain
premise is the reference context named ``domain``; the priors study adds more), their
token and character counts, and, on tasks with a fixed label set, the options'
log-probabilities after each content-free input (contextual calibration).

Every metric the plugin reports is one row of ``METRICS``, declared with keyword
arguments: its name, its rule (``score``: a function of a document's ``DocumentScores``
giving one score per option, the highest wins; or ``corpus``), its direction and scope;
its aggregations follow from those. lm-eval's registration and a task's ``metric_list``
(``metrics``), the task's scoring, the reports, the leaderboard's recompute, the group
YAMLs (kept equal by tests/test_metric_table.py) and the generators in scripts/ all read
that table, and none of them names a metric to decide what to do with it
(tests/test_metric_table.py greps): a new rule is one row here and its test. How reports
label and colour a metric sits beside them (``report/_looks.py``; a rule without a look is
shown by its name).

Batch calibration decides a document from every evaluated document's probabilities, so
its row has a corpus rule instead: the task logs each document's option probabilities
(``batch_item``) and the metric's aggregation decides them all at once
(``batch_calibrated``).

Beside the rules, *measures* describe a document without deciding it: the probability mass
the model puts on the options (PMA, Wiegreffe et al. 2023, "Increasing Probability Mass on
Answer Choices Does Not Always Improve Accuracy"), after the premise (``pma``) and after the
domain premise alone (``pma_domain``). Surface form competition is the mass the options
lose to other wordings: low PMA is where the paper says DC-PMI should help most.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lm_eval_dcpmi.rules._layout import DOMAIN

# ---- probabilities from log-probabilities: over the options renormalised, averaged over
# content-free inputs, and summed (the options' mass)


def renormalised(log_probs: Sequence[float]) -> list[float]:
    """Probabilities over the options (softmax), computed stably; every entry NaN when no
    option has a finite log-probability (nothing to normalise by).

    >>> [round(p, 4) for p in renormalised([math.log(0.2), math.log(0.6)])]
    [0.25, 0.75]
    """
    finite = [x for x in log_probs if not math.isnan(x) and x != -math.inf]
    if not finite or any(math.isnan(x) or x == math.inf for x in log_probs):
        return [math.nan] * len(log_probs)
    top = max(finite)
    weights = [0.0 if x == -math.inf else math.exp(x - top) for x in log_probs]
    total = sum(weights)
    return [w / total for w in weights]


def content_free_prior(content_free: Mapping[str, Sequence[float]]) -> list[float]:
    """Zhao et al.'s p_cf(y_i): each content-free input's option probabilities renormalised
    over the options, averaged over the inputs in probability space, renormalised again."""
    per_input = [renormalised(values) for values in content_free.values()]
    mean = [sum(column) / len(per_input) for column in zip(*per_input, strict=True)]
    total = sum(mean)
    return [p / total for p in mean] if total > 0 else [math.nan] * len(mean)


def option_mass(log_probs: Sequence[float]) -> float:
    """sum_i P(y_i): the probability mass on the options, from their log-probabilities by
    log-sum-exp (options of probability near 0 add their share instead of underflowing one
    by one); 0.0 when every option is impossible (-inf), NaN when any is NaN.

    >>> round(option_mass([math.log(0.2), math.log(0.3), -math.inf]), 12)
    0.5
    """
    if any(math.isnan(x) for x in log_probs):
        return math.nan
    finite = [x for x in log_probs if x != -math.inf]
    if not finite:
        return 0.0
    top = max(finite)
    if top == math.inf:
        return math.nan  # no log-probability is +inf: not a model's number
    return math.exp(top + math.log(math.fsum(math.exp(x - top) for x in finite)))


def log_of(p: float) -> float:
    """log p; -inf for 0, NaN for NaN."""
    return math.nan if math.isnan(p) else (-math.inf if p == 0 else math.log(p))


# ---- the rules


@dataclass(frozen=True)
class DocumentScores:
    """One document's numbers, per option in option order."""

    conditional: Sequence[float]  # log P(y_i | premise)
    references: Mapping[str, Sequence[float]]  # name -> log P(y_i | that reference context)
    n_tokens: Sequence[int] | None = None  # y_i's tokens in its conditional request
    n_chars: Sequence[int] | None = None  # y_i's characters
    # content-free input ("N/A", "", "[MASK]") -> log P(y_i | the prompt around that input)
    content_free: Mapping[str, Sequence[float]] | None = None

    def __post_init__(self) -> None:
        n = len(self.conditional)
        given = {"reference " + k: v for k, v in self.references.items()}
        given.update({"content-free " + repr(k): v for k, v in (self.content_free or {}).items()})
        given.update(
            {"token counts": self.n_tokens or [0] * n, "characters": self.n_chars or [0] * n}
        )
        bad = {what: len(values) for what, values in given.items() if len(values) != n}
        if not n or bad:
            raise ValueError(f"need one number per option ({n} options); got {bad}")


# A rule: one score per option (the highest wins), or None when the document lacks what the
# rule needs (the metric is then NaN: unknown, not wrong).
Rule = Callable[[DocumentScores], "list[float] | None"]


def _divided(values: Sequence[float], sizes: Sequence[int] | None, what: str) -> list | None:
    if sizes is None:
        return None
    if min(sizes) < 1:
        raise ValueError(f"every option needs a positive {what} count, got {list(sizes)}")
    return [value / size for value, size in zip(values, sizes, strict=True)]


def _pmi(reference: str) -> Rule:
    def score(doc: DocumentScores) -> list[float] | None:
        prior = doc.references.get(reference)
        if prior is None:
            return None
        return [c - p for c, p in zip(doc.conditional, prior, strict=True)]

    return score


def _contextual_calibration(doc: DocumentScores) -> list[float] | None:
    # argmax_i p(y_i|x) / p_cf(y_i): p(y_i|x) renormalised over the options differs from
    # P(y_i|x) by a factor common to every option, so the log-probabilities serve.
    if doc.content_free is None:
        return None
    prior = content_free_prior(doc.content_free)
    return [c - log_of(p) for c, p in zip(doc.conditional, prior, strict=True)]


@dataclass(frozen=True, kw_only=True)
class CorpusRule:
    """A rule that decides every evaluated document at once (batch calibration): each
    document logs an ``item``, and lm-eval's aggregation of the items is the accuracy."""

    item: Callable[[DocumentScores, int], list[float]]  # (scores, gold) -> what it logs
    picks: Callable[[Sequence[Sequence[float]]], list[int | None]]  # every item's option
    decisions: Callable[[Sequence[Sequence[float]]], list[float]]  # every item's 1.0/0.0
    # lm-eval's aggregation, registered under its function's name; results files record
    # its source text as the task's config
    aggregate: Callable[[Sequence[Sequence[float]]], float]
    min_documents: int  # fewer, and the task warns why the accuracy misleads:
    one_document: str  # ... on a single document
    few_documents: str  # ... on 2 to min_documents - 1


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric of a DC-PMI task: a row of ``METRICS``. How reports label and colour it
    is the report's business (``report/_looks.py``)."""

    name: str  # lm-eval's metric name (results show "<name>,none")
    rule: str  # what decides it, in words: an accuracy's score (highest wins), a count's what
    # per document: one score per option (the highest wins); or ``corpus``; neither: a count
    score: Rule | None = field(default=None, compare=False)
    corpus: CorpusRule | None = field(default=None, compare=False)
    # 1.0/0.0 per document; or 0, 1, 2...; or a number describing the document (``measure``)
    kind: Literal["accuracy", "count", "measure"] = "accuracy"
    # per document, a measure's number (it decides nothing: no option wins)
    measure: Callable[[DocumentScores], float] | None = field(default=None, compare=False)
    # None: neither direction is better (a measure); lm-eval's tables show no arrow
    higher_is_better: bool | None = True
    # which tasks report it: every DC-PMI task, or those with a fixed label set
    # (content-free inputs declared), or those with that extra reference context
    scope: Literal["every", "fixed_labels", "reference"] = "every"
    reference: str | None = None  # the reference context of a PMI under an extra one
    needs_tokenizer: bool = False  # NaN where no tokenizer is known (token counts)
    # in every results file since the first release (0.1.0): what marks a results entry as
    # a DC-PMI task's; a metric added later may be missing from older files
    in_first_release: bool = False
    # groups average it over their tasks (the group YAMLs list it: tests check they agree);
    # not counts (a mean of counts means nothing) nor accuracies only some tasks have
    group_mean: bool = False
    # lm-eval's own multiple-choice tasks report it too: alone it marks no results entry as
    # a DC-PMI task's (``dcpmi verify`` refuses an entry with any other metric of the table
    # that is no DC-PMI task it can rebuild)
    lm_eval_own: bool = False

    @property
    def aggregation(self) -> str:
        """Over a task's documents: an accuracy's or a measure's mean, a count's sum, or the
        name of a corpus rule's aggregation (lm-eval's registry knows it by that name)."""
        if self.corpus is not None:
            return self.corpus.aggregate.__name__
        return "sum" if self.kind == "count" else "mean"

    @property
    def group_aggregation(self) -> Literal["mean"] | None:
        """Over a group's tasks (the group YAMLs list it): the mean, where ``group_mean``."""
        return "mean" if self.group_mean else None


def batch_item(conditional: Sequence[float], gold: int) -> list[float]:
    """What a document logs for ``acc_bc``: its option probabilities renormalised over the
    options, then its gold index (the aggregation decides every document at once)."""
    return [*renormalised(conditional), float(gold)]


def batch_picks(items: Sequence[Sequence[float]]) -> list[int | None]:
    """Each document's option under batch calibration (Zhou et al. 2024):
    argmax_i log p(y_i|x) - log p_mean_i, where p_mean is the mean over the documents of
    their renormalised p(y|x); None for a document without finite probabilities (left out
    of the mean). Every document must have the same number of options."""
    if not items:
        return []
    sizes = {len(item) for item in items}
    if len(sizes) != 1:
        raise ValueError(
            "batch calibration needs the same options for every document; got documents "
            f"with {sorted(size - 1 for size in sizes)} options"
        )
    probabilities = [list(item[:-1]) for item in items]
    finite = [p for p in probabilities if not any(math.isnan(x) for x in p)]
    if not finite:
        return [None] * len(items)
    mean = [sum(column) / len(finite) for column in zip(*finite, strict=True)]
    return [
        _argmax([log_of(x) - log_of(m) for x, m in zip(p, mean, strict=True)])
        for p in probabilities
    ]


def batch_decisions(items: Sequence[Sequence[float]]) -> list[float]:
    """Per document 1.0/0.0 under batch calibration (``batch_picks``); a document without
    finite probabilities counts as wrong."""
    picks = batch_picks(items)
    return [
        float(pick is not None and pick == int(item[-1]))
        for pick, item in zip(picks, items, strict=True)
    ]


def batch_calibrated(items: Sequence[Sequence[float]]) -> float:
    """``acc_bc``'s aggregation: the mean of ``batch_decisions``."""
    decisions = batch_decisions(items)
    return sum(decisions) / len(decisions) if decisions else math.nan


BATCH_CALIBRATION = CorpusRule(
    item=lambda doc, gold: batch_item(doc.conditional, gold),
    picks=batch_picks,
    decisions=batch_decisions,
    aggregate=batch_calibrated,
    min_documents=20,
    one_document="dividing by its own probabilities leaves every option the same score, so "
    "BC picks option 0 (the tie rule)",
    few_documents="its prior, their mean probabilities, is mostly their own noise",
)

# In the reports' column order.
METRICS: tuple[Metric, ...] = (
    Metric(name="acc_unc", rule="log P(y | domain premise)",
           score=lambda d: list(d.references[DOMAIN]), in_first_release=True, group_mean=True),
    Metric(name="acc", rule="log P(y | premise)", score=lambda d: list(d.conditional),
           in_first_release=True, group_mean=True, lm_eval_own=True),
    Metric(name="acc_avg", rule="log P(y | premise) / tokens of y",
           score=lambda d: _divided(d.conditional, d.n_tokens, "token"),
           needs_tokenizer=True, in_first_release=True, group_mean=True),
    Metric(name="acc_norm", rule="log P(y | premise) / characters of y",  # lm-eval's acc_norm
           score=lambda d: _divided(d.conditional, d.n_chars, "character"), group_mean=True,
           lm_eval_own=True),
    Metric(name="acc_dcpmi", rule="log P(y | premise) - log P(y | domain premise)",
           score=_pmi(DOMAIN), in_first_release=True, group_mean=True),
    Metric(name="acc_cc", rule="log p(y | premise) - log p_cf(y), p_cf: content-free inputs "
           "'N/A', '', '[MASK]' (Zhao et al. 2021)", score=_contextual_calibration,
           scope="fixed_labels"),
    Metric(name="acc_bc", rule="log p(y | premise) - log mean over the evaluated documents "
           "of p(y | premise) (Zhou et al. 2024)", corpus=BATCH_CALIBRATION,
           scope="fixed_labels"),
    Metric(name="pma", rule="sum over the options of P(y | premise): the probability mass on "
           "the options (PMA, Wiegreffe et al. 2023)", kind="measure",
           measure=lambda d: option_mass(d.conditional), higher_is_better=None),
    Metric(name="pma_domain", rule="sum over the options of P(y | domain premise)",
           kind="measure", measure=lambda d: option_mass(d.references[DOMAIN]),
           higher_is_better=None),
    Metric(name="truncated", rule="requests cut from the left to fit the model's window",
           kind="count", higher_is_better=False, needs_tokenizer=True, in_first_release=True),
    Metric(name="unranked", rule="documents on which some method had no finite score to rank",
           kind="count", higher_is_better=False),
    Metric(name="tied_domain", rule="documents whose domain requests are their conditional "
           "requests: DC-PMI scores every option 0 and the tie rule picks option 0",
           kind="count", higher_is_better=False),
)  # fmt: skip
# The table's names that other modules use as keys (never as a decision about a metric):
# the paper's method, which reports lead with and test the others against; lm-eval's
# plain score, beside which the calibrations are shown; the counts (``TIED_DOMAIN``: the
# task counts it where it builds the requests, and the report marks DC-PMI beside it); the
# probability mass on the options (after the premise, after the domain premise), which the
# report's surface form competition section sorts the documents by.
HEADLINE, PLAIN = "acc_dcpmi", "acc"
TRUNCATED, UNRANKED, TIED_DOMAIN = "truncated", "unranked", "tied_domain"
MASS, DOMAIN_MASS = "pma", "pma_domain"


def pmi_metric(reference: str) -> Metric:
    """PMI under an extra reference context (the priors study, a user's premises)."""
    return Metric(
        name=f"acc_pmi_{reference}",
        rule=f"log P(y | premise) - log P(y | reference context {reference!r})",
        score=_pmi(reference),
        scope="reference",
        reference=reference,
        group_mean=True,  # a group of tasks scoring the same reference context: the priors study
    )


def task_metrics(references: Sequence[str], fixed_labels: bool) -> tuple[Metric, ...]:
    """What a DC-PMI task reports: every task's metrics, CC and BC on a fixed label set,
    PMI under each reference context besides ``domain`` (accuracies, measures, counts)."""
    chosen = [
        m for m in METRICS if m.scope == "every" or (fixed_labels and m.scope == "fixed_labels")
    ]
    extra = [pmi_metric(name) for name in references if name != DOMAIN]
    accuracies = [m for m in chosen if m.kind == "accuracy"] + extra
    later = [m for kind in ("measure", "count") for m in chosen if m.kind == kind]
    return (*accuracies, *later)


METRIC_BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}


def listed_metrics(config: Any) -> frozenset[str]:
    """The metrics a recorded task config's ``metric_list`` names: lm-eval writes a value of
    each into the results, so one that is missing was removed (a file written before a
    metric existed does not list it). Whatever is no list of mappings names none."""
    entries = config.get("metric_list") if isinstance(config, Mapping) else None
    if not isinstance(entries, list):
        return frozenset()
    return frozenset(
        e["metric"] for e in entries if isinstance(e, Mapping) and isinstance(e.get("metric"), str)
    )


def metric_named(name: str) -> Metric | None:
    """The row of ``name``, the priors' ``acc_pmi_<reference>`` included."""
    if name in METRIC_BY_NAME:
        return METRIC_BY_NAME[name]
    if name.startswith("acc_pmi_") and len(name) > len("acc_pmi_"):
        return pmi_metric(name[len("acc_pmi_") :])
    return None


# Views of the table. The paper's five methods (every task reports them), in column order:
ACCURACIES = tuple(m.name for m in METRICS if m.kind == "accuracy" and m.scope == "every")
METHODS = ACCURACIES
# Every accuracy of the table (the five, then CC and BC):
ALL_ACCURACIES = tuple(m.name for m in METRICS if m.kind == "accuracy")
# Per-task counts (summed, not averaged).
COUNTS = tuple(m.name for m in METRICS if m.kind == "count")
# What describes the documents without deciding them (averaged): PMA.
MEASURES = tuple(m.name for m in METRICS if m.kind == "measure")
# What a group of DC-PMI tasks reports (``aggregate_metric_list``), in this order.
GROUP_METRICS = tuple(m.name for m in METRICS if m.group_aggregation is not None)
# Those that mark a results entry as a DC-PMI task's (older files lack the others).
REQUIRED = tuple(m for m in ACCURACIES if METRIC_BY_NAME[m].in_first_release)


def _argmax(scores: Sequence[float]) -> int | None:
    """Index of the highest score; ties go to the lowest index (as in the spec).

    NaN and -inf are no score at all: they never win, and a list without any other
    score has no argmax (None) rather than a silent option 0.
    """
    best = None
    for i, score in enumerate(scores):
        if math.isnan(score) or score == -math.inf:
            continue
        if best is None or score > scores[best]:
            best = i
    return best


def predictions(
    doc: DocumentScores, metrics: Sequence[Metric] | None = None
) -> dict[str, int | None]:
    """Predicted option index under each per-document rule of ``metrics`` (default: the
    rules that apply to ``doc``); None where a rule lacks its inputs or has no finite score.

    >>> domain = {"domain": [-2.0, -4.5, -8.0]}
    >>> picks = predictions(DocumentScores([-4.0, -5.0, -9.0], domain, [1, 2, 6], [4, 5, 30]))
    >>> [picks[name] for name in ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi")]
    [0, 0, 2, 2, 1]
    >>> picks["acc_cc"] is None  # no content-free scores: CC has no inputs
    True
    """
    picks = {}
    for metric in METRICS if metrics is None else metrics:
        if metric.score is None:
            continue
        scores = metric.score(doc)
        picks[metric.name] = None if scores is None else _argmax(scores)
    return picks


def accuracies(
    doc: DocumentScores, gold: int, metrics: Sequence[Metric] | None = None
) -> dict[str, float]:
    """Per-document 1.0/0.0 correctness under each per-document rule, plus ``unranked``.

    A rule that cannot rank the options (every score NaN or -inf) counts the document as
    wrong, never as a pick of option 0, and ``unranked`` is 1.0. A rule whose inputs the
    document lacks (no token counts, no content-free scores) is NaN: unknown, not wrong.
    """
    result, unranked = {}, False
    for metric in METRICS if metrics is None else metrics:
        if metric.score is None:
            continue
        scores = metric.score(doc)
        if scores is None:
            result[metric.name] = math.nan
            continue
        pick = _argmax(scores)
        unranked |= pick is None
        result[metric.name] = float(pick == gold)
    return {**result, UNRANKED: float(unranked)}


def measures(doc: DocumentScores, metrics: Sequence[Metric] | None = None) -> dict[str, float]:
    """Each measure of ``metrics`` (default: the table's) on one document.

    >>> scores = DocumentScores([math.log(0.1), math.log(0.2)], {"domain": [-1.0, -1.0]})
    >>> round(measures(scores)["pma"], 12)
    0.3
    """
    return {
        metric.name: metric.measure(doc)
        for metric in (METRICS if metrics is None else metrics)
        if metric.measure is not None
    }
