"""The one metrics table (``scoring.METRICS``) and everything that must agree with it:
lm-eval's registry, the tasks' metric_list, the group YAMLs and the report's labels."""

from __future__ import annotations

import pytest
import yaml
from helpers import ROOT, make_task

from lm_eval_dcpmi.core import scoring
from lm_eval_dcpmi.core.metrics import dcpmi_metric_list, total
from lm_eval_dcpmi.core.scoring import METRICS
from lm_eval_dcpmi.harness.metrics import registered_metric
from lm_eval_dcpmi.report import results as report_results

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

COUNTS = [m for m in METRICS if m.kind == "count"]


def test_the_table_and_its_views():
    assert [m.name for m in METRICS] == [
        "acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi", "acc_cc", "acc_bc",
        "truncated", "unranked",
    ]  # fmt: skip
    assert len({m.name for m in METRICS}) == len({m.label for m in METRICS}) == len(METRICS)
    assert scoring.ACCURACIES == tuple(m.name for m in METRICS if m.scope == "every")[:5]
    assert scoring.ACCURACIES == ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi")
    assert scoring.COUNTS == ("truncated", "unranked")
    assert scoring.GROUP_METRICS == scoring.ACCURACIES
    for metric in METRICS:
        accuracy = metric.kind == "accuracy"
        every = metric.scope == "every"
        expected = "batch_calibrated" if metric.name == "acc_bc" else "mean" if accuracy else "sum"
        assert metric.aggregation == expected
        assert metric.higher_is_better is accuracy
        # groups average what every task reports; CC and BC only some tasks have
        assert metric.group_aggregation == ("mean" if accuracy and every else None)
        assert (metric.colour is not None) is accuracy
        assert (metric.score is not None) is (accuracy and metric.name != "acc_bc")
    # the report's columns and labels are the table's
    assert report_results.METHODS == scoring.ACCURACIES
    assert report_results.LABELS == {m: scoring.METRIC_BY_NAME[m].label for m in scoring.ACCURACIES}


def test_a_task_reports_what_its_reference_contexts_and_labels_allow():
    names = [m.name for m in scoring.task_metrics(["domain"], fixed_labels=False)]
    assert names == [*scoring.ACCURACIES, "truncated", "unranked"]
    names = [m.name for m in scoring.task_metrics(["domain", "empty", "answer"], True)]
    assert names == [
        *scoring.ACCURACIES, "acc_cc", "acc_bc", "acc_pmi_empty", "acc_pmi_answer",
        "truncated", "unranked",
    ]  # fmt: skip
    assert scoring.metric_named("acc_pmi_empty") == scoring.pmi_metric("empty")
    assert scoring.metric_named("acc_pmi_") is None and scoring.metric_named("nope") is None


def test_the_registry_holds_each_metrics_aggregation_and_direction():
    for metric in METRICS:
        aggregate, higher_is_better = registered_metric(metric.name)
        assert higher_is_better is metric.higher_is_better, metric.name
        if metric.aggregation == "batch_calibrated":  # items: probabilities, then gold
            # mean [0.7, 0.3]: [0.9, 0.1] -> 0 (right), [0.5, 0.5] -> 1 (wrong)
            assert aggregate([[0.9, 0.1, 0.0], [0.5, 0.5, 0.0]]) == 0.5
            continue
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
    names = [e["metric"] for e in entries]
    # the table's group metrics, then (the priors study) PMI under each extra reference
    assert names[: len(scoring.GROUP_METRICS)] == list(scoring.GROUP_METRICS)
    assert all(n.startswith("acc_pmi_") for n in names[len(scoring.GROUP_METRICS) :]), names
    for entry in entries:  # lm-eval's default group aggregation is the mean
        expected = scoring.metric_named(entry["metric"]).group_aggregation
        assert entry.get("aggregation", "mean") == expected, entry
