"""The one metrics table (``rules._scoring.METRICS``) and everything that must agree with it:
lm-eval's registry, the tasks' metric_list, the group YAMLs and the report's labels."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from helpers import (
    ROOT,
    make_task,
)

from lm_eval_dcpmi._harness._metrics import registered_metric
from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.report import _results as report_results
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.rules._registry import dcpmi_metric_list, total
from lm_eval_dcpmi.rules._scoring import METRICS

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

COUNTS = [m for m in METRICS if m.kind == "count"]


# The rows of the first releases, in their order: what results files hold. A new rule is
# a row anywhere among them (the views follow it); these must stay as they are.
PAPER = ("acc_unc", "acc", "acc_avg", "acc_norm", "acc_dcpmi")  # the paper's five methods
MEASURES = ("pma", "pma_domain")  # PMA, after the premise and after the domain premise
COUNTED = ("truncated", "unranked", "tied_domain")  # per task, summed
KNOWN = (*PAPER, "acc_cc", "acc_bc", *MEASURES, *COUNTED)


def known(names) -> list[str]:
    return [name for name in names if name in KNOWN]


def test_the_table_and_its_views():
    names = [m.name for m in METRICS]
    assert len(set(names)) == len(names) and known(names) == list(KNOWN)
    assert known(scoring.ACCURACIES) == list(PAPER)
    assert scoring.METHODS == scoring.ACCURACIES
    assert known(scoring.ALL_ACCURACIES) == [*PAPER, "acc_cc", "acc_bc"]
    assert scoring.COUNTS == COUNTED
    assert scoring.MEASURES == MEASURES
    assert known(scoring.GROUP_METRICS) == list(PAPER)
    assert scoring.REQUIRED == ("acc_unc", "acc", "acc_avg", "acc_dcpmi")  # not Char: added later
    for metric in METRICS:
        accuracy = metric.kind == "accuracy"
        # an accuracy is better higher, a count lower; a measure has no better direction
        direction = {"accuracy": True, "count": False, "measure": None}[metric.kind]
        assert metric.higher_is_better is direction
        assert (metric.score is None) is (metric.corpus is not None or not accuracy)
        assert (metric.measure is not None) is (metric.kind == "measure")
        # groups average what the row asks them to (every task must report it)
        assert metric.group_aggregation == ("mean" if metric.group_mean else None)
        assert not metric.group_mean or metric.scope == "every"
        if metric.name not in KNOWN:
            continue
        expected = (
            "batch_calibrated"
            if metric.name == "acc_bc"
            else "sum"
            if metric.kind == "count"
            else "mean"
        )
        assert metric.aggregation == expected
        assert metric.group_mean is (metric.name in PAPER)
        assert (metric.corpus is not None) is (metric.name == "acc_bc")
        assert metric.needs_tokenizer is (metric.name in ("acc_avg", "truncated"))
    # the report's columns are the table's, labelled and coloured beside the report
    assert report_results.METHODS == scoring.ACCURACIES
    assert {m: report_results.LABELS[m] for m in PAPER} == {
        "acc_unc": "Unc", "acc": "LM", "acc_avg": "Avg", "acc_norm": "Char", "acc_dcpmi": "DC-PMI"
    }  # fmt: skip
    assert [looks.metric_label(m) for m in ("acc_cc", "acc_bc", "acc_pmi_empty", "unranked")] == [
        "CC", "BC", "PMI empty", "unranked"
    ]  # fmt: skip


def _metric_names_in(path: Path, names: set[str]) -> list[str]:
    """``file:line: 'name'`` for each string constant that is exactly a metric's name (or
    its results key ``<name>,none``): code deciding by name. Messages that mention a
    metric hold longer strings, and are not counted."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.removesuffix(",none") in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_nothing_outside_the_tables_names_a_metric():
    # How a metric is computed, aggregated or shown is read from its row (or, for labels
    # and colours, its look); code that names one to decide would have to change with it.
    names = {m.name for m in METRICS}
    tables = {ROOT / "lm_eval_dcpmi/rules/_scoring.py", ROOT / "lm_eval_dcpmi/report/_looks.py"}
    files = [
        path
        for folder in ("lm_eval_dcpmi", "scripts", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in tables
    ]
    assert len(files) > 80
    found = [hit for path in files for hit in _metric_names_in(path, names)]
    assert found == []
    # the check finds what it looks for
    assert len(_metric_names_in(ROOT / "lm_eval_dcpmi/report/_looks.py", names)) == 7


def test_a_task_reports_what_its_reference_contexts_and_labels_allow():
    names = [m.name for m in scoring.task_metrics(["domain"], fixed_labels=False)]
    assert names == [*scoring.ACCURACIES, *MEASURES, *COUNTED]
    names = [m.name for m in scoring.task_metrics(["domain", "empty", "answer"], True)]
    assert names == [
        *scoring.ALL_ACCURACIES, "acc_pmi_empty", "acc_pmi_answer", *MEASURES, *COUNTED,
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
    # function `total` (its source text), as in every results file written so far; a new
    # rule's entry comes in the table's order
    entries = dcpmi_metric_list([])
    assert [e["metric"] for e in entries] == [m.name for m in scoring.task_metrics([], False)]
    assert [e for e in entries if e["metric"] in KNOWN] == [
        {"metric": "acc_unc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_avg", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_dcpmi", "aggregation": "mean", "higher_is_better": True},
        {"metric": "pma", "aggregation": "mean", "higher_is_better": None},
        {"metric": "pma_domain", "aggregation": "mean", "higher_is_better": None},
        {"metric": "truncated", "aggregation": total, "higher_is_better": False},
        {"metric": "unranked", "aggregation": total, "higher_is_better": False},
        {"metric": "tied_domain", "aggregation": total, "higher_is_better": False},
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
