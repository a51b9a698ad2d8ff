"""A quick look that is a fair sample: `dcpmi run --quick N` (documents evenly spread over
each split), the warning on a `--limit` prefix whose labels are far from the split's, and
the table's notes for both."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import load_task, run_dcpmi
from report_helpers import entry, md_rows, results_dict, ten_document_run

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.cli import _run_steps as run_steps
from lm_eval_dcpmi.cli._run_options import RunOptions, split_run_options
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report._loading import load_results
from lm_eval_dcpmi.report._results import run_from_dict
from lm_eval_dcpmi.report._tables import format_run
from lm_eval_dcpmi.task import _quick_look as quick_look

MODEL = ["--model", "hf", "--model_args", "pretrained=x", "--device", "cpu"]

# ------------------------------------------------------------------ --quick N


@pytest.mark.fast
def test_spread_indices_are_even_deterministic_and_distinct():
    assert quick_look.spread_indices(10, 4) == [0, 3, 6, 9]
    assert quick_look.spread_indices(1821, 5) == [0, 455, 910, 1365, 1820]
    assert quick_look.spread_indices(7, 1) == [3]  # one document: the middle one
    assert quick_look.spread_indices(3, 5) == [0, 1, 2]  # more than the split: all of it
    for total in (2, 56, 277, 1821):
        for count in range(1, total + 1, 7):
            indices = quick_look.spread_indices(total, count)
            assert len(set(indices)) == len(indices) == count
            assert indices == sorted(indices) and 0 <= indices[0] and indices[-1] < total
    assert quick_look.quick_samples({"a": 4, "b": 100}, 3) == {"a": [0, 2, 3], "b": [0, 50, 99]}


@pytest.mark.fast
def test_quick_option_is_taken_out_of_lm_evals_options():
    options, rest = split_run_options(["--tasks", "x", "--quick", "50", "--log_samples"])
    assert (options.quick, rest) == (50, ["--tasks", "x", "--log_samples"])
    assert split_run_options(["--quick=7"]) == (RunOptions(quick=7), [])
    assert split_run_options(["--limit", "3"]) == (RunOptions(), ["--limit", "3"])
    for bad in (["--quick", "0"], ["--quick", "ten"], ["--quick"], ["--quick=-2"]):
        with pytest.raises(DCPMIError, match="expected a whole number of documents per task"):
            split_run_options(bad)
    with pytest.raises(DCPMIError, match="--quick is given twice"):
        split_run_options(["--quick", "2", "--quick", "3"])


@pytest.mark.fast
@pytest.mark.parametrize(
    ("option", "value"), [("--limit", "20"), ("--samples", '{"dcpmi_copa": [1]}')]
)
def test_quick_with_limit_or_samples_is_one_line(capsys, option, value):
    status = cli.main(["run", *MODEL, "--tasks", "dcpmi_copa", "--quick", "20", option, value])
    assert status == 2
    assert capsys.readouterr().err == (
        "dcpmi: --quick 20 picks 20 documents evenly spread over each task's split and cannot "
        f"be combined with {option}; drop one of the two.\n"
    )


def test_quick_sample_of_sst2_holds_both_labels(task_manager):
    """SST-2's test file is ordered by label: its first 20 documents are all positive, its
    first 50 nearly so; the 50 spread ones are half and half, as the split is."""
    sst2 = load_task(task_manager, "dcpmi_sst2")
    labels = quick_look.gold_labels(sst2)
    assert Counter(labels) == {0: 912, 1: 909}
    (indices,) = quick_look.quick_samples({"dcpmi_sst2": len(labels)}, 50).values()
    assert Counter(labels[i] for i in indices) == {0: 25, 1: 25}
    assert quick_look.skewed_prefix(labels, 20) == (
        "labels of the first 20 {1: 20}, of all 1821 {0: 912, 1: 909}"
    )
    assert quick_look.skewed_prefix(labels, 50) == (
        "labels of the first 50 {0: 4, 1: 46}, of all 1821 {0: 912, 1: 909}"
    )
    assert quick_look.skewed_tasks({"dcpmi_sst2": sst2}, 20) == {
        "dcpmi_sst2": "labels of the first 20 {1: 20}, of all 1821 {0: 912, 1: 909}"
    }
    half = quick_look.skewed_tasks({"dcpmi_sst2": sst2}, 0.5)  # lm-eval: ceil(1821 / 2)
    assert half["dcpmi_sst2"].startswith("labels of the first 911 {0: 65, 1: 846}, of all")


# ------------------------------------------------------------------ --limit's prefix


@pytest.mark.fast
def test_a_prefix_far_from_the_splits_labels_is_named():
    by_label = [0] * 50 + [1] * 50  # a file sorted by label
    assert quick_look.skewed_prefix(by_label, 20) == (
        "labels of the first 20 {0: 20}, of all 100 {0: 50, 1: 50}"
    )
    assert quick_look.label_distance(by_label[:20], by_label) == 0.5
    mixed = [0, 1] * 50
    assert quick_look.skewed_prefix(mixed, 20) is None
    assert quick_look.skewed_prefix(by_label, 100) is None  # the whole split
    # 7 of 10 against 50%: distance 0.2, not beyond it; 8 of 10 is.
    assert quick_look.skewed_prefix([0] * 7 + [1] * 3 + mixed, 10) is None
    assert quick_look.skewed_prefix([0] * 8 + [1] * 2 + mixed, 10) is not None
    # a label missing from a prefix that could hold every label, shares otherwise close
    four = [0, 1, 2, 3] * 25
    assert quick_look.skewed_prefix([0, 1, 2, 0, 1, 2, *four], 6) is not None
    assert quick_look.skewed_prefix(four, 6) is None
    assert quick_look.prefix_size(1821, 0.01) == 19 and quick_look.prefix_size(10, 20) == 10


@pytest.mark.fast
def test_skewed_prefixes_warn_once_naming_quick(capsys):
    quick_look.warn_skewed({}, 20)
    assert capsys.readouterr().err == ""
    quick_look.warn_skewed({"dcpmi_sst2": "labels of the first 20 {1: 20}, of all X"}, 20)
    assert capsys.readouterr().err == (
        "dcpmi: warning: --limit takes each task's first documents, and their gold labels are "
        "far from the split's (dcpmi_sst2: labels of the first 20 {1: 20}, of all X); their "
        "accuracies are not a fair look and their significance marks are left out. Use "
        "--quick 20 for documents evenly spread over each split.\n"
    )


# ------------------------------------------------------------------ the printed table


@pytest.mark.fast
def test_a_quick_run_is_marked_as_a_sample_not_a_partial_run():
    data = results_dict({"dcpmi_sst2": entry(0.5, 0.6, 0.6, 0.56, n=50)})
    data["n-samples"]["dcpmi_sst2"]["original"] = 1821
    run = run_from_dict(data)
    run.quick = 50
    text = format_run(run)
    assert md_rows(text)["dcpmi_sst2"][0] == "50 / 1821"
    assert (
        "- **A sample (--quick 50)**: 50 documents of each task, evenly spread over its "
        "evaluation split (dcpmi_sst2 50 of 1821): an estimate of the full split's "
        "accuracies, not the full split's.\n"
    ) in text
    assert "Partial run" not in text


@pytest.mark.fast
def test_an_unfair_prefix_loses_its_significance_marks(tmp_path):
    (run,) = load_results([ten_document_run(tmp_path)])
    assert md_rows(format_run(run))["dcpmi_cb"][5] == "**100.0**†"
    run.drop_significance({"dcpmi_cb": "labels of the first 10 {0: 10}, of all 56 {...}"})
    text = format_run(run)
    assert md_rows(text)["dcpmi_cb"][5] == "**100.0**"
    assert text.endswith(
        "- No significance marks for dcpmi_cb: --limit took each task's first documents, "
        "whose gold labels are far from the split's (dcpmi_cb: labels of the first 10 "
        "{0: 10}, of all 56 {...}). `dcpmi run --quick N` scores N documents evenly spread "
        "over each split.\n"
        "- No best method's lead over the runner-up is significant (McNemar's exact test on "
        "the documents, p < 0.05).\n"
    )


@pytest.mark.fast
def test_dcpmi_runs_table_follows_what_the_checks_found(tmp_path, capsys):
    results = ten_document_run(tmp_path)
    unfair = {"dcpmi_cb": "labels of the first 10 {0: 10}, of all 56 {0: 23, 1: 28, 2: 5}"}
    run_steps.print_table(results, run_steps.CheckedRun(config=None, skewed=unfair))
    printed = capsys.readouterr().out
    assert md_rows(printed)["dcpmi_cb"][5] == "**100.0**"  # no dagger
    assert "- No significance marks for dcpmi_cb: --limit took" in printed
    run_steps.print_table(results, run_steps.CheckedRun(config=None, quick=10))
    assert "**A sample (--quick 10)**" not in capsys.readouterr().out  # 10 of 10: the split


@pytest.mark.fast
def test_the_footer_promises_only_what_follows(tmp_path):
    (run,) = load_results([ten_document_run(tmp_path)])
    printed = format_run(run)  # what dcpmi run prints: no intervals after it
    assert "†: the best method's lead over the runner-up is significant" in printed
    assert "intervals below" not in printed
    from lm_eval_dcpmi.report._tables import markdown_report

    assert "a tie. 95% intervals below." in markdown_report([run])  # they follow there
    data = results_dict({"dcpmi_copa": entry(0.5, 0.6, 0.6, 0.7, n=20)}, limit=20)
    data["n-samples"]["dcpmi_copa"]["original"] = 500
    without_samples = format_run(run_from_dict(data))
    assert "†" not in without_samples and "intervals below" not in without_samples
    assert "Intervals and significance need the per-document samples" in without_samples


@pytest.mark.slow
@pytest.mark.usefixtures("data_dir")
def test_dcpmi_run_quick_scores_the_spread_documents(tmp_path):
    completed = run_dcpmi(
        ["--tasks", "dcpmi_cb", "--quick", "4", "--log_samples", "--output_path", str(tmp_path)]
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert md_rows(completed.stdout)["dcpmi_cb"][0] == "4 / 56"
    assert "**A sample (--quick 4)**: 4 documents of each task" in completed.stdout
    (samples,) = tmp_path.rglob("samples_dcpmi_cb_*.jsonl")
    doc_ids = [json.loads(line)["doc_id"] for line in samples.read_text().splitlines()]
    assert sorted(doc_ids) == [0, 18, 37, 55]
