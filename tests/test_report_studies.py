"""Study groups in reports (paper tab. 3 and 4): per-task rows, mean and sample std, figure."""

from __future__ import annotations

import csv
import io
import json

import pytest
from helpers import ROOT
from report_helpers import entry, md_rows, png_size, results_dict

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi import report
from lm_eval_dcpmi.report import _studies as studies
from lm_eval_dcpmi.report._summary import summary

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

TEMPLATES = "dcpmi_sst2_templates"
# Three templates; DC-PMI 70, 80, 90 -> mean 80.0, sample std 10.0; LM 50, 60, 100 ->
# mean 70.0, std sqrt(((-20)^2 + (-10)^2 + 30^2) / 2) = sqrt(700) = 26.4575...
MEMBERS = {
    "dcpmi_sst2_v0": entry(0.2, 0.5, 0.5, 0.7, norm=0.6),
    "dcpmi_sst2_v1": entry(0.3, 0.6, 0.6, 0.8, norm=0.6),
    "dcpmi_sst2_v2": entry(0.4, 1.0, 0.7, 0.9, norm=0.6),
}


def study_results(with_paper_task: bool = True) -> dict:
    rows = dict(MEMBERS)
    if with_paper_task:
        rows["dcpmi_sst2"] = entry(0.1, 0.9, 0.9, 0.95, norm=0.9)
    # lm-eval's own row for the group (the plain mean): replaced by the study's rows.
    rows[TEMPLATES] = entry(0.3, 0.7, 0.6, 0.8, n=300, norm=0.6)
    return results_dict(rows, groups={TEMPLATES: list(MEMBERS)})


def test_studies_are_the_paper_study_groups():
    assert set(paper.STUDIES) == {"dcpmi_sst2_templates", "dcpmi_sst2_4shot"}


def test_study_mean_and_sample_std():
    run = report.run_from_dict(study_results())
    (study,) = run.studies
    assert study.group == TEMPLATES
    assert [m.task for m in study.members] == list(MEMBERS)
    spread = studies.spreads(study)
    assert spread["acc_dcpmi"].mean == pytest.approx(0.8)
    assert spread["acc_dcpmi"].std == pytest.approx(0.1)
    assert spread["acc"].std == pytest.approx(700**0.5 / 100)
    assert spread["acc_norm"].std == pytest.approx(0.0)


def test_main_table_leaves_the_study_to_its_own_section():
    run = report.run_from_dict(study_results())
    assert [row.task for row in run.main_rows] == ["dcpmi_sst2"]
    assert [row.task for row in run.tasks] == ["dcpmi_sst2"]  # what the summary counts
    text = report.markdown_report([run])
    assert f"### Study: {TEMPLATES}" in text
    study_part = text[text.index("### Study") :]
    rows = md_rows(study_part)
    assert list(rows) == [*MEMBERS, "mean", "std"]
    assert rows["dcpmi_sst2_v2"] == ["100", "40.0", "**100.0**", "70.0", "60.0", "90.0"]
    assert rows["mean"] == ["", "30.0", "70.0", "60.0", "60.0", "**80.0**"]
    assert rows["std"] == ["", "10.0", "26.5", "10.0", "0.0", "10.0"]
    assert "sample standard deviation (n - 1) over the 3 task(s)" in study_part


def test_study_csv_rows():
    run = report.run_from_dict(study_results())
    rows = list(csv.DictReader(io.StringIO(report.csv_report([run]))))
    assert [(r["task"], r["study"], r["statistic"]) for r in rows] == [
        ("dcpmi_sst2", "", ""),
        *((task, TEMPLATES, "") for task in MEMBERS),
        (TEMPLATES, TEMPLATES, "mean"),
        (TEMPLATES, TEMPLATES, "std"),
    ]
    mean, std = rows[-2], rows[-1]
    assert (mean["DC-PMI"], mean["LM"], mean["best"], mean["n"]) == ("80.0", "70.0", "DC-PMI", "")
    assert (std["DC-PMI"], std["LM"], std["Char"], std["best"]) == ("10.0", "26.5", "0.0", "")


def test_membership_comes_from_the_results_file():
    """Whatever tasks the group holds in this run (here: two of them, other names)."""
    rows = {"my_variant_a": entry(0.1, 0.2, 0.3, 0.4), "my_variant_b": entry(0.1, 0.2, 0.3, 0.6)}
    rows["dcpmi_sst2_4shot"] = entry(0.1, 0.2, 0.3, 0.5, n=200)
    run = report.run_from_dict(
        results_dict(rows, groups={"dcpmi_sst2_4shot": ["my_variant_b", "my_variant_a"]})
    )
    (study,) = run.studies
    assert [m.task for m in study.members] == ["my_variant_b", "my_variant_a"]
    assert run.main_rows == []
    text = report.markdown_report([run])
    assert "| Task | n |" in text and "\n| my_variant_b | 100 |" in text
    assert "| *mean* | | 10.0 | 20.0 | 30.0 | – | **50.0** |" in text
    # Char is missing from these files: its mean and std are missing too.
    assert "| *std* | | 0.0 | 0.0 | 0.0 | – | 14.1 |" in text


def test_study_figure_and_no_main_figure_without_main_rows(tmp_path, capsys):
    data = study_results(with_paper_task=False)
    path = tmp_path / "gpt2" / "results_2026-01-01T00-00-00.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    assert report.report_command([str(path)], str(out), ["md", "png"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        f"figure_gpt2_{TEMPLATES}.png",
        "report.md",
    ]
    assert png_size(out / f"figure_gpt2_{TEMPLATES}.png") == (1000, 600)


def test_mean_and_std_of_the_committed_real_template_run():
    """The embedded model's run of the 15 templates (results/studies): the report's
    spread is the mean and sample std of the per-task accuracies lm-eval wrote."""
    import json
    import statistics

    (path,) = [
        p
        for p in (ROOT / "results" / "studies").glob("results_*.json")
        if "dcpmi_sst2_v0" in json.loads(p.read_text())["results"]
    ]
    data = json.loads(path.read_text())
    (run,) = report.load_results([path])
    (study,) = run.studies
    assert len(study.members) == 15
    spread = studies.spreads(study)
    for method in ("acc", "acc_dcpmi", "acc_unc"):
        per_task = [data["results"][f"dcpmi_sst2_v{i}"][f"{method},none"] for i in range(15)]
        assert spread[method].mean == pytest.approx(statistics.mean(per_task))
        assert spread[method].std == pytest.approx(statistics.stdev(per_task))
    # docs/studies.md's table: DC-PMI 59.4 +- 10.8, LM 57.7 +- 12.1 (in points)
    assert round(spread["acc_dcpmi"].mean * 100, 1) == 59.4
    assert round(spread["acc_dcpmi"].std * 100, 1) == 10.8
    assert round(spread["acc"].std * 100, 1) == 12.1


def test_summary_is_per_model_not_per_file(tmp_path):
    """results once held a model's main run beside a folder of its study runs, and the
    summary showed the study run as a second model (a column of n/a). A model's files are
    one column, pooling their tasks; a study-only run adds nothing; one model, no summary."""
    main = results_dict(
        {"dcpmi_copa": entry(0.5, 0.7, 0.7, 0.6), "dcpmi_cb": entry(0.2, 0.3, 0.4, 0.9)}
    )
    more = results_dict({"dcpmi_rte": entry(0.6, 0.5, 0.5, 0.9)})  # another machine's share
    study = study_results(with_paper_task=False)
    other = results_dict({"dcpmi_copa": entry(0.9, 0.7, 0.7, 0.6)}, model="gpt2-xl")
    paths = []
    for name, data in (("main", main), ("more", more), ("study", study), ("xl", other)):
        path = tmp_path / name / f"results_{name}.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data))
        paths.append(path)
    runs = report.load_results(paths)
    assert [r.model for r in runs] == [
        "gpt2 [results_main]",
        "gpt2 [results_more]",
        "gpt2 [results_study]",
        "gpt2-xl",
    ]
    shares = summary(runs)
    assert list(shares["acc_dcpmi"]) == ["gpt2", "gpt2-xl", "overall"]
    assert shares["acc_dcpmi"]["gpt2"].wins == 2 and shares["acc_dcpmi"]["gpt2"].tasks == 3
    assert shares["acc_unc"]["gpt2-xl"].wins == 1
    assert shares["acc_dcpmi"]["overall"].tasks == 4
    assert "| DC-PMI | 66.7% (2/3) | 0.0% (0/1) | 50.0% (2/4) |" in report.summary_markdown(runs)

    # One model (its main runs and its study run): no summary section, no summary files.
    one_model = paths[:3]
    assert "## Best method" not in report.markdown_report(report.load_results(one_model))
    out = tmp_path / "out"
    assert report.report_command([str(p) for p in one_model], str(out), ["md", "csv"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["report.csv", "report.md"]

    # Two runs of one model on the same task (a rerun): pooled, copa would count twice,
    # so each run keeps its own column.
    rerun = tmp_path / "rerun" / "results_rerun.json"
    rerun.parent.mkdir()
    rerun.write_text(json.dumps(results_dict({"dcpmi_copa": entry(0.1, 0.2, 0.3, 0.4)})))
    shares = summary(report.load_results([paths[0], rerun]))
    assert list(shares["acc"]) == ["gpt2 [results_main]", "gpt2 [results_rerun]", "overall"]
    assert shares["acc"]["overall"].tasks == 3
