"""The one metrics table (``scoring.METRICS``) and everything that must agree with it:
lm-eval's registry, the tasks' metric_list, the group YAMLs and the report's labels."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT
from lm_eval.api.registry import get_metric_aggregation, is_higher_better
from test_dcpmi_task import make_task

from lm_eval_dcpmi.core import scoring
from lm_eval_dcpmi.core.metrics import dcpmi_metric_list, total
from lm_eval_dcpmi.core.scoring import METRICS
from lm_eval_dcpmi.report import results as report_results

COUNTS = [m for m in METRICS if m.kind == "count"]


def test_the_table_and_its_views():
    assert [m.name for m in METRICS] == [
        "acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi", "truncated", "unranked"
    ]  # fmt: skip
    assert len({m.name for m in METRICS}) == len({m.label for m in METRICS}) == len(METRICS)
    assert scoring.ACCURACIES == tuple(m.name for m in METRICS if m.kind == "accuracy")
    assert scoring.COUNTS == ("truncated", "unranked")
    assert scoring.GROUP_METRICS == scoring.ACCURACIES
    for metric in METRICS:
        accuracy = metric.kind == "accuracy"
        assert metric.aggregation == ("mean" if accuracy else "sum")
        assert metric.higher_is_better is accuracy
        assert metric.group_aggregation == ("mean" if accuracy else None)
    # the report's columns and labels are the table's
    assert report_results.METHODS == scoring.ACCURACIES
    assert report_results.LABELS == {m.name: m.label for m in METRICS if m.kind == "accuracy"}


def test_the_registry_holds_each_metrics_aggregation_and_direction():
    for metric in METRICS:
        assert is_higher_better(metric.name) is metric.higher_is_better, metric.name
        aggregate = get_metric_aggregation(metric.name)
        expected = 0.5 if metric.aggregation == "mean" else 2.0
        assert aggregate([1.0, 0.0, 1.0, 0.0]) == expected, metric.name


@pytest.mark.parametrize("count", [m.name for m in COUNTS])
def test_a_count_named_in_a_users_metric_list_is_summed(count):
    # Named without an aggregation, lm-eval takes the registered one: it was the mean.
    task = make_task(metric_list=[{"metric": "acc"}, {"metric": count}])
    assert task.aggregation()[count]([1.0, 0.0, 2.0]) == 3.0
    assert task.higher_is_better()[count] is False


def test_the_metric_list_a_task_gets_is_unchanged():
    # what results files record as the task's config: the counts' aggregation is the
    # function `total` (its source text), as in every results file written so far
    assert dcpmi_metric_list([]) == [
        {"metric": "acc_unc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_avg", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_dcpmi", "aggregation": "mean", "higher_is_better": True},
        {"metric": "truncated", "aggregation": total, "higher_is_better": False},
        {"metric": "unranked", "aggregation": total, "higher_is_better": False},
    ]


def group_yamls() -> list:
    """Every task_configs YAML with an aggregate_metric_list (groups only: plain YAML)."""
    found = []
    for path in sorted((ROOT / "task_configs").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "aggregate_metric_list" in text:
            found.append(pytest.param(path, id=str(path.relative_to(ROOT / "task_configs"))))
    return found


def test_the_group_yamls_are_found():
    names = {p.values[0].name for p in group_yamls()}
    assert {"dcpmi.yaml", "dcpmi_sst2_4shot.yaml", "dcpmi_sst2_templates.yaml"} <= names
    assert "mmlu_dcpmi.yaml" in names


@pytest.mark.parametrize("path", group_yamls())
def test_a_group_yaml_aggregates_the_tables_group_metrics(path):
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))["aggregate_metric_list"]
    assert [e["metric"] for e in entries] == list(scoring.GROUP_METRICS)
    for entry in entries:  # lm-eval's default group aggregation is the mean
        expected = scoring.METRIC_BY_NAME[entry["metric"]].group_aggregation
        assert entry.get("aggregation", "mean") == expected, entry
