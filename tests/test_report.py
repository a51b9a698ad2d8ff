"""Paper-style reports (``lm_eval_dcpmi.report``) on a real lm-eval run and hand-made results.

Intervals, significance and the per-option export: test_report_samples.py; studies:
test_report_studies.py; the statistics on hand-computed numbers: test_report_stats.py.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
from pathlib import Path

import pytest
from helpers import E2E_LIMIT
from report_helpers import OTHER_COLUMNS, PAPER, entry, md_rows, png_size, results_dict

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi import report
from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.report._loading import load_results
from lm_eval_dcpmi.report._output import report_command
from lm_eval_dcpmi.report._results import METHODS, ReportError, TaskRow, run_from_dict
from lm_eval_dcpmi.report._summary import summary, summary_csv, summary_markdown
from lm_eval_dcpmi.report._tables import csv_report, format_run_table, markdown_table

LABEL = looks.LABELS
NAN = float("nan")


# ---------------------------------------------------------------------------
# Helpers (the hand-made results rows and files: report_helpers.py)


def expected_best(values: dict[str, float]) -> set[str]:
    shown = {m: round(100 * v, 1) for m, v in values.items() if not math.isnan(v)}
    top = max(shown.values())
    return {m for m, v in shown.items() if v == top}


# ---------------------------------------------------------------------------
# The real lm_eval run of conftest (`lm_eval_run`: the dcpmi group, or DCPMI_E2E_TASKS,
# E2E_LIMIT documents per task, samples logged)


def real_layout(data: dict) -> tuple[list[str], list[str]]:
    """(DC-PMI tasks in the paper's order then by name, DC-PMI groups by name) of a run."""
    results = data["results"]
    dcpmi = [t for t, row in results.items() if "acc_dcpmi,none" in row]
    groups = sorted(t for t in dcpmi if t in data["group_subtasks"])
    order = paper.paper_order()
    tasks = [t for t in order if t in dcpmi and t not in groups]
    tasks += sorted(t for t in dcpmi if t not in order and t not in groups)
    return tasks, groups


def expected_text(entry: dict, method: str, best: set[str]) -> str:
    if f"{method},none" not in entry:
        return "–"  # a group aggregating fewer metrics than its tasks report
    value = entry[f"{method},none"]
    text = "n/a" if math.isnan(value) else f"{100 * value:.1f}"
    return f"**{text}**" if method in best else text


def real_values(entry: dict) -> dict[str, float]:
    return {m: entry[f"{m},none"] for m in METHODS if f"{m},none" in entry}


def file_of(out: Path) -> Path:
    return next(out.rglob("results_*.json"))


@pytest.mark.slow
def test_real_table_numbers_equal_results_file(lm_eval_run):
    data, out = lm_eval_run.results, lm_eval_run.output_dir
    tasks, groups = real_layout(data)
    (run,) = load_results([out])
    assert [row.task for row in run.rows] == [*tasks, *groups]
    assert [row.is_group for row in run.rows] == [False] * len(tasks) + [True] * len(groups)
    assert run.source == file_of(out)
    assert run.model == "SmolLM2-135M-Instruct.Q4_1"
    table = md_rows(markdown_table(run))
    assert list(table) == [*tasks, *(f"{g} (mean)" for g in groups)]
    originals = {t: data["n-samples"][t]["original"] for t in tasks}
    for row in run.rows:
        entry = data["results"][row.task]
        cells = table[row.label]
        if row.is_group:
            leaves = [
                t for t in tasks if t in paper.study_members(row.task, data["group_subtasks"])
            ]
            total = sum(originals[t] for t in leaves)
            assert cells[0] == f"{E2E_LIMIT * len(leaves)} / {total}"
        else:
            assert cells[0] == f"{E2E_LIMIT} / {originals[row.task]}"
            assert row.n == E2E_LIMIT
        best = expected_best(real_values(entry))
        # With at most 5 documents no lead is significant (smallest two-sided exact p:
        # 2 * 0.5**5 = 0.0625), so no best value carries the dagger.
        assert E2E_LIMIT <= 5
        for method, cell in zip(METHODS, cells[1:], strict=True):
            assert cell == expected_text(entry, method, best), (row.task, method)
        assert set(row.best) == best


@pytest.mark.slow
def test_real_csv_matches_results_file(lm_eval_run):
    data = lm_eval_run.results
    tasks, groups = real_layout(data)
    rows = list(csv.DictReader(io.StringIO(csv_report(load_results(lm_eval_run.output_dir)))))
    assert [r["task"] for r in rows] == [*tasks, *groups]
    for row in rows:
        entry = data["results"][row["task"]]
        values = real_values(entry)
        for method in METHODS:
            if method in values:
                assert float(row[LABEL[method]]) == pytest.approx(100 * values[method], abs=0.05)
            else:
                assert row[LABEL[method]] == "–"
        assert set(row["best"].split(";")) == {LABEL[m] for m in expected_best(values)}
        assert row["limit"] == str(E2E_LIMIT)
        if row["task"] in groups:
            assert (row["is_group"], row["truncated"], row["lead_p"]) == ("1", "", "")
        else:
            assert (row["is_group"], row["n"], row["truncated"]) == ("0", str(E2E_LIMIT), "0")


@pytest.mark.slow
def test_real_run_limit_is_reported(lm_eval_run):
    (run,) = load_results([file_of(lm_eval_run.output_dir)])
    assert run.limit == E2E_LIMIT and run.limited
    text = report.markdown_report([run])
    assert f"Partial run (--limit {E2E_LIMIT})" in text
    first = run.tasks[0]
    assert f"{first.task} {E2E_LIMIT} of {first.n_total}" in text


@pytest.mark.slow
def test_real_report_command_writes_files_and_figure(lm_eval_run, tmp_path, capsys):
    target = tmp_path / "report"
    assert report_command([str(lm_eval_run.output_dir)], str(target)) == 0
    printed = capsys.readouterr()
    assert (target / "report.md").read_text() == printed.out
    tasks, _groups = real_layout(lm_eval_run.results)
    assert f"\n| {tasks[0]} | {E2E_LIMIT} / " in printed.out
    assert (target / "report.csv").is_file()
    assert (target / "intervals.csv").is_file()  # the run logged samples
    assert not (target / "summary.md").exists()  # one run: no summary
    (figure,) = target.glob("figure_*.png")
    assert figure.name == "figure_SmolLM2-135M-Instruct.Q4_1.png"
    assert png_size(figure) == (1200, 800)
    assert f"dcpmi report: wrote {target / 'report.md'}" in printed.err


@pytest.mark.slow
def test_real_format_run_table_on_in_memory_dict(lm_eval_run):
    data = lm_eval_run.results
    tasks, groups = real_layout(data)
    text = format_run_table(data)
    assert text == format_run_table(copy.deepcopy(data))
    table = md_rows(text.split("### Calibration")[0])  # the main table, not CC/BC's
    assert list(table) == [*tasks, *(f"{g} (mean)" for g in groups)]
    assert text.startswith("Model: SmolLM2-135M-Instruct.Q4_1 (best per task in **bold**)")


@pytest.mark.slow
def test_real_summary_over_two_altered_copies(lm_eval_run, tmp_path):
    """Two 'models' from one real file: the copy's numbers changed by hand."""
    data = lm_eval_run.results
    tasks, _groups = real_layout(data)
    small = file_of(lm_eval_run.output_dir)
    big_data = copy.deepcopy(data)
    big_data["model_name"] = big_data["config"]["model_args"]["pretrained"] = "big-model"
    big_data["config"]["model_args"].pop("gguf_file", None)
    # big-model: DC-PMI best on the first task; on the others LM and Avg tie.
    big_data["results"][tasks[0]].update(
        {f"{m},none": 0.5 for m in METHODS} | {"acc_dcpmi,none": 1.0}
    )
    for task in tasks[1:]:
        big_data["results"][task].update(
            {"acc_unc,none": 0.1, "acc,none": 0.6, "acc_avg,none": 0.6, "acc_norm,none": 0.3}
            | {"acc_dcpmi,none": 0.2}
        )
    big = tmp_path / "big" / "results_2026-01-01T00-00-00.json"
    big.parent.mkdir()
    big.write_text(json.dumps(big_data))

    runs = load_results([small, big])
    assert [r.model for r in runs] == ["SmolLM2-135M-Instruct.Q4_1", "big-model"]
    shares = summary(runs)
    small_wins = {m: 0 for m in METHODS}
    for task in tasks:
        for m in expected_best(real_values(data["results"][task])):
            small_wins[m] += 1
    others = len(tasks) - 1
    big_wins = {"acc_dcpmi": 1, "acc": others, "acc_avg": others, "acc_unc": 0, "acc_norm": 0}
    for m in METHODS:
        assert shares[m]["SmolLM2-135M-Instruct.Q4_1"].wins == small_wins[m]
        assert shares[m]["big-model"].wins == big_wins[m]
        assert shares[m]["overall"].wins == small_wins[m] + big_wins[m]
        assert shares[m]["overall"].tasks == 2 * len(tasks)
    assert f"| DC-PMI | {100 * small_wins['acc_dcpmi'] / len(tasks):.1f}% (" in (
        summary_markdown(runs)
    )

    target = tmp_path / "out"
    assert report_command([str(small), str(big)], str(target), ["md", "csv", "png"]) == 0
    assert {p.name for p in target.iterdir()} == {
        "report.md",
        "report.csv",
        "summary.md",
        "summary.csv",
        "intervals.csv",  # from the real run's samples; the copy has none
        "figure_SmolLM2-135M-Instruct.Q4_1.png",
        "figure_big-model.png",
    }
    for figure in target.glob("*.png"):
        assert png_size(figure) == (1200, 800)
    rows = list(csv.reader(io.StringIO((target / "summary.csv").read_text())))
    assert rows[0] == ["method", "SmolLM2-135M-Instruct.Q4_1", "big-model", "overall"]
    assert rows[-1] == ["tasks", str(len(tasks)), str(len(tasks)), str(2 * len(tasks))]
    intervals = list(csv.DictReader(io.StringIO((target / "intervals.csv").read_text())))
    assert {r["model"] for r in intervals} == {"SmolLM2-135M-Instruct.Q4_1"}


# ---------------------------------------------------------------------------
# Marking the best method (hand-made)


@pytest.mark.fast
def test_best_marks_ties_and_nan():
    data = results_dict(
        {
            "dcpmi_copa": entry(0.5, 0.7, 0.7, 0.6),  # LM and Avg tie
            "dcpmi_cb": entry(0.9, 0.2, NAN, 0.3),  # Avg n/a, Unc wins
            "dcpmi_rte": entry(0.4, 0.4, 0.4, 0.4),  # four-way tie
            "dcpmi_sst2": entry(0.30004, 0.29996, 0.1, 0.2),  # equal as shown (30.0)
            "dcpmi_trec": entry(0.1, 0.2, NAN, 0.2),  # tie beside a NaN
            "dcpmi_boolq": entry(0.1, 0.2, 0.3, 0.4, norm=0.45),  # Char wins
        }
    )
    run = run_from_dict(data)
    best = {row.task: row.best for row in run.rows}
    assert best == {
        "dcpmi_copa": ("acc", "acc_avg"),
        "dcpmi_rte": ("acc_unc", "acc", "acc_avg", "acc_dcpmi"),  # Char is missing
        "dcpmi_cb": ("acc_unc",),
        "dcpmi_boolq": ("acc_norm",),
        "dcpmi_sst2": ("acc_unc", "acc"),
        "dcpmi_trec": ("acc", "acc_dcpmi"),
    }
    table = md_rows(markdown_table(run))
    assert table["dcpmi_copa"] == ["100", "50.0", "**70.0**", "**70.0**", "–", "60.0"]
    assert table["dcpmi_cb"] == ["100", "**90.0**", "20.0", "n/a", "–", "30.0"]
    assert table["dcpmi_rte"] == ["100", "**40.0**", "**40.0**", "**40.0**", "–", "**40.0**"]
    assert table["dcpmi_sst2"][1:3] == ["**30.0**", "**30.0**"]
    assert table["dcpmi_trec"] == ["100", "10.0", "**20.0**", "n/a", "–", "**20.0**"]
    assert table["dcpmi_boolq"] == ["100", "10.0", "20.0", "30.0", "**45.0**", "40.0"]
    rows = {r["task"]: r for r in csv.DictReader(io.StringIO(csv_report([run])))}
    assert rows["dcpmi_copa"]["best"] == "LM;Avg"
    assert rows["dcpmi_cb"]["best"] == "Unc"
    assert rows["dcpmi_cb"]["Avg"] == "n/a"
    assert rows["dcpmi_rte"]["best"] == "Unc;LM;Avg;DC-PMI"
    assert (rows["dcpmi_boolq"]["best"], rows["dcpmi_boolq"]["Char"]) == ("Char", "45.0")
    assert (rows["dcpmi_rte"]["Char"], rows["dcpmi_rte"]["lead_p"]) == ("–", "")
    notes = report.markdown_report([run])
    missing = next(line for line in notes.splitlines() if "the results file does not have" in line)
    # Char (and any method the table holds beyond the paper's, which the file lacks too)
    assert missing.startswith("- Char") and " – where the results file does not have " in missing
    if not OTHER_COLUMNS:
        assert missing.startswith("- Char is – where the results file does not have it (")
    assert "Intervals and significance need the per-document samples" in notes


@pytest.mark.fast
def test_all_nan_row_has_no_best():
    row = TaskRow("t", {m: NAN for m in METHODS})
    assert row.best == ()
    assert report.dcpmi_gain(row) != report.dcpmi_gain(row)  # NaN


@pytest.mark.fast
def test_task_order_paper_then_unknown_then_group():
    names = ["zeta_task", "dcpmi_trec", "alpha_task", "dcpmi_cb", "dcpmi_copa", "dcpmi_hellaswag"]
    rows = {name: entry(0.1, 0.2, 0.3, 0.4) for name in names}
    rows["dcpmi"] = entry(0.1, 0.2, 0.3, 0.4, n=600)
    data = results_dict(rows, groups={"dcpmi": ["dcpmi_copa", "dcpmi_cb", "dcpmi_trec"]})
    run = run_from_dict(data)
    assert [row.task for row in run.rows] == [
        "dcpmi_copa",
        "dcpmi_hellaswag",
        "dcpmi_cb",
        "dcpmi_trec",
        "alpha_task",
        "zeta_task",
        "dcpmi",
    ]
    group = run.rows[-1]
    assert group.is_group and group.n == 300 and group.n_total == 300
    assert "| *dcpmi (mean)* | 300 |" in markdown_table(run)
    # Group rows are not tasks for the summary.
    assert summary([run])["acc_dcpmi"]["gpt2"].tasks == 6


@pytest.mark.fast
def test_non_dcpmi_rows_are_left_out():
    rows = {
        "dcpmi_copa": entry(0.1, 0.2, 0.3, 0.4),
        "copa": {"alias": "copa", "acc,none": 0.6, "acc_stderr,none": 0.02, "sample_len": 9},
    }
    run = run_from_dict(results_dict(rows))
    assert [row.task for row in run.rows] == ["dcpmi_copa"]


@pytest.mark.fast
def test_format_run_table_notes_nan_limit_and_truncation():
    rows = {
        "dcpmi_copa": entry(0.5, 0.7, NAN, 0.6, n=6),
        "dcpmi_race_h": entry(0.5, 0.7, 0.8, 0.6, n=6, **{"truncated,none": 2.0}),
    }
    data = results_dict(rows, limit=6)
    data["n-samples"] = {
        "dcpmi_copa": {"original": 500, "effective": 6},
        "dcpmi_race_h": {"original": 3498, "effective": 6},
    }
    text = format_run_table(data)
    assert "| dcpmi_copa | 6 / 500 | 50.0 | **70.0** | n/a | – | 60.0 |" in text
    assert "--limit 6" in text
    assert "Avg is n/a" in text
    assert "dcpmi_race_h 2" in text
    with pytest.raises(ReportError, match="holds no DC-PMI task"):
        format_run_table(results_dict({"copa": {"acc,none": 0.5, "sample_len": 5}}))


@pytest.mark.fast
def test_limit_detected_from_n_samples_without_config_limit():
    data = results_dict({"dcpmi_copa": entry(0.5, 0.7, 0.7, 0.6, n=10)})
    data["n-samples"]["dcpmi_copa"]["original"] = 500
    run = run_from_dict(data)
    assert run.limit is None and run.limited
    assert "Partial run (--limit or --samples)" in report.markdown_report([run])


# ---------------------------------------------------------------------------
# Summary (hand-made)


@pytest.mark.fast
def test_summary_shares_on_two_hand_made_runs(tmp_path):
    small = results_dict(
        {
            "dcpmi_copa": entry(0.5, 0.7, 0.7, 0.6),  # LM, Avg
            "dcpmi_cb": entry(0.2, 0.3, 0.4, 0.9),  # DC-PMI
            "dcpmi_rte": entry(0.6, 0.5, NAN, 0.6),  # Unc, DC-PMI
            "dcpmi_trec": entry(0.2, 0.3, 0.3, 0.3),  # LM, Avg, DC-PMI
        },
        model="gpt2",
    )
    large = results_dict(
        {
            "dcpmi_copa": entry(0.5, 0.7, 0.6, 0.8),  # DC-PMI
            "dcpmi_cb": entry(0.9, 0.3, 0.4, 0.5),  # Unc
        },
        model="gpt2-xl",
    )
    paths = []
    for name, data in (("gpt2", small), ("gpt2-xl", large)):
        path = tmp_path / name / "results_2026-01-01T00-00-00.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data))  # NaN written as NaN, as lm-eval does
        paths.append(path)
    runs = load_results([tmp_path])  # a folder: one subfolder per model
    assert [r.model for r in runs] == ["gpt2", "gpt2-xl"]
    shares = summary(runs)
    wins = {
        m: (s["gpt2"].wins, s["gpt2-xl"].wins, s["overall"].wins)
        for m, s in shares.items()
        if m in PAPER
    }
    assert wins == {
        "acc_unc": (1, 1, 2),
        "acc": (2, 0, 2),
        "acc_avg": (2, 0, 2),
        "acc_norm": (0, 0, 0),  # not in these results files
        "acc_dcpmi": (3, 1, 4),
    }
    assert shares["acc"]["overall"].tasks == 6
    text = summary_markdown(runs)
    assert "| Method | gpt2 | gpt2-xl | overall |" in text
    assert "| DC-PMI | 75.0% (3/4) | 50.0% (1/2) | 66.7% (4/6) |" in text
    assert "| Unc | 25.0% (1/4) | 50.0% (1/2) | 33.3% (2/6) |" in text
    rows = [r for r in csv.reader(io.StringIO(summary_csv(runs))) if r[0] not in OTHER_COLUMNS]
    assert rows == [
        ["method", "gpt2", "gpt2-xl", "overall"],
        ["Unc", "25.0", "50.0", "33.3"],
        ["LM", "50.0", "0.0", "33.3"],
        ["Avg", "50.0", "0.0", "33.3"],
        ["Char", "0.0", "0.0", "0.0"],
        ["DC-PMI", "75.0", "50.0", "66.7"],
        ["tasks", "4", "2", "6"],
    ]
    assert "## Best method, share of tasks" in report.markdown_report(runs)


@pytest.mark.fast
def test_folder_reads_newest_dcpmi_file_per_model(tmp_path):
    model = tmp_path / "gpt2"
    model.mkdir()
    old = results_dict({"dcpmi_copa": entry(0.1, 0.1, 0.1, 0.9)})
    new = results_dict({"dcpmi_copa": entry(0.9, 0.1, 0.1, 0.1)})
    (model / "results_2026-01-01T00-00-00.json").write_text(json.dumps(old))
    (model / "results_2026-02-01T00-00-00.json").write_text(json.dumps(new))
    # Newer still, but not a DC-PMI run: skipped.
    plain = results_dict({"copa": {"acc,none": 0.5, "sample_len": 5}})
    (model / "results_2026-03-01T00-00-00.json").write_text(json.dumps(plain))
    (run,) = load_results([tmp_path])
    assert run.source.name == "results_2026-02-01T00-00-00.json"
    # Both files given explicitly: two runs of one model, told apart by date.
    runs = load_results(sorted(model.glob("results_2026-0[12]*.json")))
    assert [r.model for r in runs] == ["gpt2 [2026-01-01T00-00-00]", "gpt2 [2026-02-01T00-00-00]"]
    # The same file twice is read once.
    assert len(load_results([tmp_path, model / "results_2026-02-01T00-00-00.json"])) == 1


# ---------------------------------------------------------------------------
# Refusals


@pytest.mark.fast
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json at all", "not valid JSON at column 1 (Expecting value); an lm-eval results"),
        ("[1, 2, 3]", "not an lm-eval results file (no 'results' object"),
        ('{"config": {}}', "not an lm-eval results file (no 'results' object"),
        (
            json.dumps(results_dict({"copa": {"acc,none": 0.5, "sample_len": 5}})),
            "holds no DC-PMI task (tasks: copa)",
        ),
    ],
)
def test_refuses_other_files(tmp_path, capsys, content, message):
    path = tmp_path / "results_x.json"
    path.write_text(content)
    with pytest.raises(ReportError) as caught:
        load_results([path])
    text = str(caught.value)
    assert message in text and str(path) in text and "\n" not in text
    assert report_command([str(path)], str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err == f"dcpmi report: error: {text}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
def test_refuses_binary_missing_and_empty_folder(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    with pytest.raises(ReportError, match="not an lm-eval results file"):
        load_results([binary])
    with pytest.raises(ReportError, match="no such file or folder"):
        load_results([tmp_path / "missing.json"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReportError, match="no results_\\*.json under this folder"):
        load_results([empty])
    plain = tmp_path / "plain" / "m"
    plain.mkdir(parents=True)
    (plain / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps(results_dict({"copa": {"acc,none": 0.5, "sample_len": 5}}))
    )
    with pytest.raises(ReportError, match="no DC-PMI results under this folder"):
        load_results([tmp_path / "plain"])


# ---------------------------------------------------------------------------
# Figure and command line (hand-made)


@pytest.mark.fast
def test_figure_size_with_nan_and_group(tmp_path):
    rows = {f"dcpmi_{t}": entry(0.2, 0.5, NAN, 0.6) for t in ("copa", "cb", "rte", "sst2")}
    rows["dcpmi"] = entry(0.2, 0.5, NAN, 0.6, n=400)
    run = run_from_dict(results_dict(rows, groups={"dcpmi": list(rows)[:-1]}))
    path = report.plot_run(run, tmp_path / "f.png")
    assert png_size(path) == (1200, 800)
    path = report.plot_run(run, tmp_path / "small.png", figsize=(6, 4), dpi=50)
    assert png_size(path) == (300, 200)


@pytest.mark.fast
def test_the_report_subcommand_parses_and_runs(tmp_path, capsys):
    import argparse

    from lm_eval_dcpmi.cli._report import Report

    command = Report()
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    path.write_text(json.dumps(results_dict({"dcpmi_copa": entry(0.1, 0.2, 0.3, 0.4)})))
    parser = argparse.ArgumentParser(prog="dcpmi report")
    command.add_arguments(parser)
    args = parser.parse_args([str(path), "--out", str(tmp_path / "o"), "--format", "md,csv"])
    assert command.run(args) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["report.csv", "report.md"]
    assert "| dcpmi_copa | 100 | 10.0 | 20.0 | 30.0 | – | **40.0** |" in capsys.readouterr().out
    args = parser.parse_args([str(path), "--format", "pdf"])
    assert command.run(args) == 2
    assert "unknown format 'pdf'" in capsys.readouterr().err
