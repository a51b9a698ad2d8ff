"""The report's calibration and "which prior?" tables, on a hand-made results dict."""

from __future__ import annotations

import pytest

from lm_eval_dcpmi.report import _comparisons as comparisons
from lm_eval_dcpmi.report import _stats as stats
from lm_eval_dcpmi.report._results import per_document, run_from_dict

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

FIVE = {"acc_unc": 0.25, "acc": 0.5, "acc_avg": 0.5, "acc_norm": 0.5, "acc_dcpmi": 0.5}
# BC items (probabilities, gold; binary fractions, so the sums are exact): the mean is
# [0.5, 0.5]; divided by it the documents pick 0 (right), 0 on a tie (wrong), 0 (wrong),
# 1 (wrong): 25%.
ITEMS = [[0.75, 0.25, 0.0], [0.5, 0.5, 1.0], [0.625, 0.375, 1.0], [0.125, 0.875, 0.0]]


def samples() -> list[dict]:
    per_doc = {
        "acc": [1, 0, 1, 0],
        "acc_dcpmi": [1, 1, 0, 0],
        "acc_cc": [1, 1, 1, 0],
        "acc_pmi_answer": [0, 0, 0, 0],
    }
    rows = []
    for i in range(4):
        row = {"doc_id": i, "filter": "none", "acc_bc": ITEMS[i]}
        row.update({m: float(v[i]) for m, v in per_doc.items()})
        row.update({m: 0.0 for m in ("acc_unc", "acc_avg", "acc_norm")})
        rows.append(row)
    return rows


def results() -> dict:
    entry = {f"{m},none": v for m, v in FIVE.items()}
    entry.update({"acc_cc,none": 0.75, "acc_bc,none": 0.25, "acc_pmi_answer,none": 0.0})
    entry["acc_pmi_answer_stderr,none"] = 0.0
    return {
        "results": {"dcpmi_x": entry},
        "n-samples": {"dcpmi_x": {"original": 4, "effective": 4}},
        "config": {"model": "hf"},
    }


def test_bc_is_decided_over_the_task_when_read_from_samples():
    per_doc = per_document(samples())
    assert per_doc["acc_bc"] == [1.0, 0.0, 0.0, 0.0]
    assert per_doc["acc_cc"] == [1.0, 1.0, 1.0, 0.0]
    assert "acc_pmi_answer_stderr" not in per_doc


def test_the_calibration_table_tests_cc_and_bc_against_dcpmi():
    run = run_from_dict(results(), samples={"dcpmi_x": samples()})
    assert run.rows[0].extra == {"acc_cc": 0.75, "acc_bc": 0.25, "acc_pmi_answer": 0.0}
    text = comparisons.calibration_markdown(run)
    lines = text.splitlines()
    assert "| Task | n | LM | DC-PMI | CC | BC |" in lines
    (row,) = [line for line in lines if line.startswith("| dcpmi_x |")]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[:2] == ["dcpmi_x", "4"]
    assert cells[2].startswith("50.0 [") and cells[3].startswith("50.0 [")
    # CC right where DC-PMI was wrong once, never the reverse: McNemar's exact p = 1.0
    assert cells[4].startswith("75.0 [") and cells[4].endswith(", p=1.000")
    assert cells[5].startswith("25.0 [") and cells[5].endswith(", p=1.000")
    assert lines[-1] == "| mean (1 tasks) | | 50.0 | 50.0 | 75.0 | 25.0 |"


def test_the_priors_table_names_each_prior_against_the_papers_premise():
    run = run_from_dict(results(), samples={"dcpmi_x": samples()})
    lines = comparisons.priors_markdown(run).splitlines()
    assert "| Task | n | DC-PMI (paper's premise) | PMI answer |" in lines
    (row,) = [line for line in lines if line.startswith("| dcpmi_x |")]
    assert "0.0 [0.0, 49.0], p=0.500" in row
    # without samples: the accuracies alone
    bare = run_from_dict(results())
    assert "| dcpmi_x | 4 | 50.0 | 0.0 |" in comparisons.priors_markdown(bare)
    assert comparisons.priors_markdown(run_from_dict({**results(), "results": {
        "dcpmi_y": {f"{m},none": v for m, v in FIVE.items()}}})) == ""  # fmt: skip


def test_the_default_premise_is_set_against_the_papers_with_a_paired_interval():
    last_word = [1.0, 0.0, 0.0, 0.0]  # right on document 0 only; DC-PMI on 0 and 1
    rows = [{**row, "acc_pmi_last_word": last_word[i]} for i, row in enumerate(samples())]
    data = results()
    data["results"]["dcpmi_x"].update({"acc_pmi_last_word,none": 0.25})
    run = run_from_dict(data, samples={"dcpmi_x": rows})
    lines = comparisons.premise_gap_table(run.rows)
    assert lines[0] == (
        "| Task | n | DC-PMI (paper's premise) | DC-PMI (last-word premise) "
        "| difference [95% CI] | p |"
    )
    # both right once, DC-PMI alone right once, neither twice: 25 - 50 = -25 points, and
    # McNemar's exact p of one discordant pair is 1
    interval = stats.paired_difference(
        stats.PairCounts(both=1, first_only=0, second_only=1, neither=2)
    )
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert cells[0:2] == ["dcpmi_x", "4"]
    assert cells[2].startswith("50.0 [") and cells[3].startswith("25.0 [")
    assert cells[4] == f"-25.0 [{100 * interval.low:+.1f}, {100 * interval.high:+.1f}]"
    assert interval.low < -0.25 < interval.high
    assert cells[5] == "1.000"
    assert lines[3] == "| mean (1 tasks) | | 50.0 | 25.0 | -25.0 | |"
    # the report adds it under the priors table; a task without the prior is left out
    assert lines[2] in comparisons.priors_markdown(run).splitlines()
    assert comparisons.premise_gap_table(run_from_dict(results()).rows)[2:] == []
