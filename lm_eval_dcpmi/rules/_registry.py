"""The plugin's metrics as lm-eval knows them: registered by name, with aggregations.

Both read ``_scoring``'s table. The registration gives a metric that a user's own
``metric_list`` names without an aggregation the table's (counts are summed, a corpus
rule's items aggregated by its function). ``dcpmi_metric_list`` gives a DC-PMI task its
``metric_list``: the task's own metrics, then the plugin's accuracies and counts, so
lm-eval's public config, not its private dicts, declares what the task reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval_dcpmi._harness import add_aggregation, add_metric, default_metrics
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules._scoring import DOMAIN, METRICS, Metric, task_metrics


def total(items: list[float]) -> float:
    """Aggregation for per-task counts (requests truncated, documents unranked): their sum."""
    return float(sum(items))


def _per_document(items: Any) -> Any:  # lm-eval's own metric functions pass values through
    return items


# lm-eval has no "sum" aggregation; a metric registered with one needs it in the registry
# (lm-eval names a metric's default aggregation by looking its function up there).
add_aggregation("sum", total)
# The aggregations dcpmi_metric_list writes: the functions themselves, not their names, so
# that results files record the same config as before the registration (their source).
_LISTED_AGGREGATION: dict[str, Any] = {"mean": "mean", "sum": total}
for _metric in METRICS:
    if _metric.corpus is not None:
        add_aggregation(_metric.aggregation, _metric.corpus.aggregate)
        _LISTED_AGGREGATION[_metric.aggregation] = _metric.corpus.aggregate


def register_metrics(metrics: Sequence[Metric]) -> None:
    """Register with lm-eval those of ``metrics`` it does not know yet (the table's at
    import; PMI under a task's extra reference contexts when the task is built)."""
    for metric in metrics:
        add_metric(metric.name, metric.higher_is_better, metric.aggregation, _per_document)


register_metrics(METRICS)


def dcpmi_metric_list(
    configured: Sequence[dict] | None, metrics: Sequence[Metric] | None = None
) -> list[dict]:
    """The task's own metrics (lm-eval's multiple-choice defaults when it names none),
    then those of the plugin's ``metrics`` (the task's: ``_scoring.task_metrics``) that it
    does not name, with their aggregations."""
    if configured is None:
        configured = [
            {"metric": name, "aggregation": "mean", "higher_is_better": True}
            for name in default_metrics("multiple_choice")
        ]
    if metrics is None:  # a task with the domain premise alone
        metrics = task_metrics((DOMAIN,), fixed_labels=False)
    names = {entry.get("metric") for entry in configured}
    if "acc_mutual_info" in names:
        raise DCPMIConfigError(
            "metric acc_mutual_info adds its own unconditional requests; DC-PMI replaces it "
            "(acc_unc and acc_dcpmi, with a domain premise; lm-eval's empty context is the "
            "reference context `{kind: empty}`): remove it from metric_list."
        )
    ours = [
        {
            "metric": metric.name,
            "aggregation": _LISTED_AGGREGATION[metric.aggregation],
            "higher_is_better": metric.higher_is_better,
        }
        for metric in metrics
        if metric.name not in names
    ]
    return [*configured, *ours]
