"""The plugin's metrics as lm-eval knows them: registered by name, with aggregations.

``dcpmi_metric_list`` gives a DC-PMI task its ``metric_list``: the task's own metrics,
then the plugin's accuracies (mean) and counts (sum), so lm-eval's public config, not
its private dicts, declares what the task reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval.api.registry import DEFAULT_METRIC_REGISTRY, metric_registry, register_metric

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.scoring import ACCURACIES, COUNTS


def total(items: list[float]) -> float:
    """Aggregation for per-task counts (requests truncated, documents unranked): their sum."""
    return float(sum(items))


def _per_document(items: Any) -> Any:  # lm-eval's own metric functions pass values through
    return items


# Register the plugin's metrics with lm-eval, so that a metric_list names them like its own.
for _metric in (*ACCURACIES, *COUNTS):
    if _metric not in metric_registry:
        register_metric(
            metric=_metric,
            higher_is_better=_metric in ACCURACIES,
            output_type="multiple_choice",
            aggregation="mean",
        )(_per_document)


def dcpmi_metric_list(configured: Sequence[dict] | None) -> list[dict]:
    """The task's own metrics (lm-eval's multiple-choice defaults when it names none),
    then the plugin's accuracies (mean) and counts (sum) that it does not name."""
    if configured is None:
        configured = [
            {"metric": name, "aggregation": "mean", "higher_is_better": True}
            for name in DEFAULT_METRIC_REGISTRY["multiple_choice"]
        ]
    names = {entry.get("metric") for entry in configured}
    if "acc_mutual_info" in names:
        raise DCPMIConfigError(
            "metric acc_mutual_info adds its own unconditional requests; DC-PMI replaces it "
            "(acc_unc and acc_dcpmi, with a domain premise): remove it from metric_list."
        )
    ours = [
        {"metric": name, "aggregation": "mean", "higher_is_better": True}
        for name in ACCURACIES
        if name not in names
    ] + [
        {"metric": name, "aggregation": total, "higher_is_better": False}
        for name in COUNTS
        if name not in names
    ]
    return [*configured, *ours]
