"""lm-eval's metric and aggregation registries (``lm_eval/api/registry.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# lm-eval's own aggregations ("mean", ...) are registered when lm_eval.api.metrics is
# imported: before the plugin registers its own ("sum"), so that names resolve as in lm-eval.
import lm_eval.api.metrics  # noqa: F401
from lm_eval.api.registry import (
    AGGREGATION_REGISTRY,
    DEFAULT_METRIC_REGISTRY,
    metric_registry,
    register_aggregation,
    register_metric,
)


def add_aggregation(name: str, function: Callable[[list[Any]], Any]) -> None:
    """Register ``function`` as the aggregation ``name`` unless lm-eval knows that name.

    0.4: ``register_aggregation(name)(function)`` into ``AGGREGATION_REGISTRY``; lm-eval
    names a metric's default aggregation by looking its function up there.
    """
    if name not in AGGREGATION_REGISTRY:
        register_aggregation(name)(function)


def add_metric(
    name: str,
    higher_is_better: bool,
    aggregation: str,
    function: Callable[[Any], Any],
    output_type: str = "multiple_choice",
) -> None:
    """Register the metric ``name`` unless lm-eval knows it (0.4: ``register_metric``)."""
    if name not in metric_registry:
        register_metric(
            metric=name,
            higher_is_better=higher_is_better,
            output_type=output_type,
            aggregation=aggregation,
        )(function)


def default_metrics(output_type: str) -> list[str]:
    """The metrics lm-eval gives a task of ``output_type`` whose config names none
    (0.4: ``DEFAULT_METRIC_REGISTRY[output_type]``)."""
    return list(DEFAULT_METRIC_REGISTRY[output_type])


def registered_metric(name: str) -> tuple[Callable[[list[Any]], Any], bool]:
    """The aggregation function and direction lm-eval's registry holds for a metric name
    (what the plugin registered, for its own metrics).

    0.4: ``get_metric_aggregation`` and ``is_higher_better`` (``lm_eval/api/registry.py``),
    three registries filled by ``register_metric(**args)``. 0.5.0.dev1: one
    ``metric_registry`` of ``Metric`` objects (``_MetricRegistry.get``).
    """
    from lm_eval.api import registry

    if hasattr(registry, "get_metric_aggregation"):  # lm-eval 0.4
        return registry.get_metric_aggregation(name), registry.is_higher_better(name)
    metric = registry.metric_registry.get(name)
    return metric.aggregation, metric.higher_is_better
