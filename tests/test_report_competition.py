"""Surface form competition in the report: PMA quartiles, flips and the trend, on made-up
documents computed by hand; the section, its CSV and its figure from a results folder."""

from __future__ import annotations

import csv
import io
import math

import pytest
from report_helpers import (
    STAMP,
    entry,
    md_rows,
    metric_samples,
    png_size,
    results_dict,
    write_run,
)

from lm_eval_dcpmi.report import _competition as competition
from lm_eval_dcpmi.report._loading import load_results
from lm_eval_dcpmi.report._output import report_command
from lm_eval_dcpmi.report._results import run_from_dict

pytestmark = pytest.mark.fast

# Eight documents (doc 0-7): PMA, LM's and DC-PMI's 1.0/0.0.
# By PMA: Q1 docs 1, 5 (0.01, 0.02), Q2 docs 3, 7, Q3 docs 6, 2, Q4 docs 0, 4 (0.70, 0.80).
# DC-PMI fixes docs 1, 5 (Q1), 3 (Q2) and breaks doc 0 (Q4): LM 4/8, DC-PMI 6/8.
PMA = [0.70, 0.01, 0.60, 0.03, 0.80, 0.02, 0.50, 0.04]
PMA_DOMAIN = [0.5] * 8
LM = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
DCPMI = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def run_with_pma(tmp_path, reported=None, pma=PMA):
    """A results folder of dcpmi_copa on the eight documents; ``reported``: the results'
    pma (default: the mean of the samples', as lm-eval computes it)."""
    values = {"acc": LM, "acc_dcpmi": DCPMI, "acc_avg": LM, "acc_norm": LM, "acc_unc": LM}
    values |= {"pma": pma, "pma_domain": PMA_DOMAIN}
    mean = sum(pma) / len(pma) if reported is None else reported
    row = entry(0.5, 0.5, 0.5, 0.75, n=8, norm=0.5, **{"pma,none": mean, "pma_domain,none": 0.5})
    data = results_dict({"dcpmi_copa": row})
    return write_run(tmp_path / "run", data, {"dcpmi_copa": metric_samples(values)})


def test_quartiles_by_rank_lowest_first_ties_by_document_order():
    assert competition.quartile_groups(PMA) == [[1, 5], [3, 7], [6, 2], [0, 4]]
    # 10 documents: sizes 2, 3, 2, 3 (floor(k * 10 / 4)); equal values keep their order
    assert competition.quartile_groups([0.5] * 10) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert competition.quartile_groups([math.nan, 0.2, 0.1, math.nan, 0.3, 0.4]) == [
        [2],
        [1],
        [4],
        [5],
    ]


def test_gain_by_quartile_flips_and_trend_by_hand(tmp_path):
    (run,) = load_results([run_with_pma(tmp_path)])
    (found,) = competition.competitions(run)
    assert (found.task, found.n) == ("dcpmi_copa", 8)
    assert math.isclose(found.mass, sum(PMA) / 8) and found.domain_mass == 0.5
    gains = [round(100 * q.comparison.difference.value, 6) for q in found.quartiles]
    assert gains == [100.0, 50.0, 0.0, -50.0]
    assert [(q.low, q.high, q.median) for q in found.quartiles] == [
        (0.01, 0.02, 0.015),
        (0.03, 0.04, 0.035),
        (0.50, 0.60, 0.55),
        (0.70, 0.80, 0.75),
    ]
    # McNemar's exact test: 2 of 2 discordant for DC-PMI in Q1 (p = 2 * 0.5^2), 1 of 1 in Q2
    assert [q.comparison.p_value for q in found.quartiles] == [0.5, 1.0, 1.0, 1.0]
    counts = found.flips.counts
    assert (counts.first_only, counts.second_only, counts.n) == (3, 1, 8)  # fixes, breaks
    assert found.flips.p_value == pytest.approx(0.625)  # 2 * P(X >= 3), X ~ B(4, 1/2)
    # Spearman: PMA ranks 1..8 (docs 1, 5, 3, 7, 6, 2, 0, 4) against the gains' average
    # ranks (-1: 1; 0: 3.5; +1: 7) = (7, 7, 7, 3.5, 3.5, 3.5, 1, 3.5): -32.5 / sqrt(42 * 35)
    assert found.trend == pytest.approx(-32.5 / math.sqrt(42 * 35))
    assert 0.005 < found.trend_p < 0.01  # t = -3.91 on 6 degrees of freedom


def test_the_section_in_the_report(tmp_path):
    runs = load_results([run_with_pma(tmp_path)])
    text = competition.competition_markdown(runs)
    assert text.startswith("## Surface form competition: gpt2\n\nDC-PMI's gain over LM by")
    per_task, by_quartile = text.split("\nBy quartile:")
    assert "thesis" in per_task
    assert md_rows(per_task)["dcpmi_copa"] == [
        "8",
        "0.338",
        "0.500",
        "3",
        "1",
        "0.625",
        "+100.0, p=0.500",
        "+50.0, p=1.000",
        "+0.0, p=1.000",
        "-50.0, p=1.000",
        "-0.848, p=0.008",
    ]
    assert (
        "DC-PMI gains more in the lowest PMA quartile than in the highest on 1 of 1 tasks; "
        "the trend is negative on 1 (1 with p < 0.05) and significantly positive, against "
        "the thesis, on 0." in text
    )
    quartile_rows = [line for line in by_quartile.splitlines() if line.startswith("| dcpmi_copa")]
    # Newcombe: Wilson [0.342, 1] and [0, 0.658] of 2/2 and 0/2, no correlation (a margin
    # is 0): 1 - sqrt(0.658^2 + 0.658^2) = 0.070
    assert quartile_rows[0] == (
        "| dcpmi_copa | Q1 | 2 | 0.010-0.020 | 0.015 | 0.0 | 100.0 | +100.0 [7.0, 100.0], p=0.500 |"
    )
    assert quartile_rows[3].startswith(
        "| dcpmi_copa | Q4 | 2 | 0.700-0.800 | 0.750 | 100.0 | 50.0 |"
    )


def test_report_files_with_pma_add_the_csv_and_the_figure(tmp_path):
    out = tmp_path / "out"
    assert report_command([str(run_with_pma(tmp_path))], str(out)) == 0
    assert "\n## Surface form competition: gpt2\n" in (out / "report.md").read_text()
    table = list(csv.DictReader(io.StringIO((out / "competition.csv").read_text())))
    assert [r["quartile"] for r in table] == ["Q1", "Q2", "Q3", "Q4", "all"]
    assert (table[0]["n"], table[0]["gain"], table[0]["fixes"]) == ("2", "100", "2")
    assert (table[4]["fixes"], table[4]["breaks"], table[4]["mcnemar_p"]) == ("3", "1", "0.625")
    assert table[4]["trend_rho"] == "-0.8477" and table[0]["trend_rho"] == ""
    figures = sorted(p.name for p in out.glob("*.png"))
    assert "figure_gpt2_pma.png" in figures
    assert png_size(out / "figure_gpt2_pma.png") == (600, 360)  # one task: one panel


def test_without_pma_there_is_no_section(tmp_path):
    """Results written before the plugin logged PMA: no section, no CSV, no figure."""
    values = {"acc": LM, "acc_dcpmi": DCPMI, "acc_avg": LM, "acc_norm": LM, "acc_unc": LM}
    data = results_dict({"dcpmi_copa": entry(0.5, 0.5, 0.5, 0.75, n=8, norm=0.5)})
    path = write_run(tmp_path / "run", data, {"dcpmi_copa": metric_samples(values)})
    out = tmp_path / "out"
    assert report_command([str(path)], str(out)) == 0
    assert "Surface form competition" not in (out / "report.md").read_text()
    assert not (out / "competition.csv").exists()
    assert not list(out.glob("*_pma.png"))


def test_samples_whose_pma_does_not_average_to_the_results_are_refused(tmp_path, capsys):
    path = run_with_pma(tmp_path, reported=0.5)
    assert report_command([str(path)]) == 2
    error = capsys.readouterr().err
    assert "its per-document pma averages 0.3375, but the results file reports 0.5;" in error


def test_a_task_with_fewer_documents_than_quartiles_has_no_row():
    samples = metric_samples({"acc": LM[:3], "acc_dcpmi": DCPMI[:3], "pma": PMA[:3]})
    data = results_dict({"dcpmi_copa": entry(0.5, 0.5, 0.5, 0.5, n=3)})
    run = run_from_dict(data, None, samples={"dcpmi_copa": samples})
    assert competition.competitions(run) == []


def test_a_document_whose_pma_is_nan_is_named_where_it_is_left_out(tmp_path, capsys):
    """Doc 3's PMA is NaN (a loglikelihood that is not finite; the results' mean is NaN
    too): the section keeps the other seven, says under its table which it left out, and
    the report warns on stderr; it is never dropped without a word."""
    pma = [*PMA[:3], math.nan, *PMA[4:]]
    path = run_with_pma(tmp_path, pma=pma)
    (run,) = load_results([path])
    (found,) = competition.competitions(run)
    assert (found.n, found.left_out) == (7, (3,))
    # 7 documents by PMA: docs 1 | 5, 7 | 6, 2 | 0, 4 (sizes floor(7k/4): 1, 2, 2, 2)
    assert [q.comparison.counts.n for q in found.quartiles] == [1, 2, 2, 2]
    assert [(q.low, q.high) for q in found.quartiles] == [
        (0.01, 0.01),
        (0.02, 0.04),
        (0.50, 0.60),
        (0.70, 0.80),
    ]
    assert report_command([str(path)]) == 0
    out, err = capsys.readouterr()
    per_task = out.split("## Surface form competition")[1].split("\nBy quartile:")[0]
    assert md_rows(per_task)["dcpmi_copa"][0] == "7"
    assert (
        "\ndcpmi_copa: 1 of 8 documents left out, their PMA NaN (a loglikelihood that is not "
        "finite): doc 3.\n" in out
    )
    samples = path.with_name(f"samples_dcpmi_copa_{STAMP}.jsonl")
    assert err.splitlines() == [
        f"dcpmi report: warning: {samples} (dcpmi_copa): the PMA of 1 document(s) is NaN (doc "
        "3); the surface form competition section leaves them out"
    ]
