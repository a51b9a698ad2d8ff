"""Reports on runs with logged samples: intervals, significance marks, per-option export."""

from __future__ import annotations

import csv
import io

import pytest
from report_helpers import (
    PAPER,
    STAMP,
    entry,
    md_rows,
    results_dict,
    ten_document_run,
    write_run,
)

from lm_eval_dcpmi import report
from lm_eval_dcpmi.report import _looks as looks
from lm_eval_dcpmi.report._loading import load_results
from lm_eval_dcpmi.report._output import report_command
from lm_eval_dcpmi.report._samples import task_layout
from lm_eval_dcpmi.rules import _scoring as scoring

METHODS = tuple(scoring.METHODS)


@pytest.mark.fast
def test_intervals_and_paired_differences_from_samples(tmp_path):
    (run,) = load_results([ten_document_run(tmp_path)])
    assert run.has_samples and set(run.samples_files) == {"dcpmi_copa", "dcpmi_cb"}
    text = report.markdown_report([run])
    intervals = md_rows(text[text.index("### 95% intervals") : text.index("### DC-PMI against")])
    # Wilson: 0/10 -> [0, 27.8], 4/10 -> [16.8, 68.7], 7/10 -> [39.7, 89.2].
    assert intervals["dcpmi_copa"] == [
        "10",
        "0.0 [0.0, 27.8]",
        "40.0 [16.8, 68.7]",
        "40.0 [16.8, 68.7]",
        "40.0 [16.8, 68.7]",
        "70.0 [39.7, 89.2]",
    ]
    differences = md_rows(text[text.index("### DC-PMI against") :])
    copa = differences["dcpmi_copa"]
    assert copa[1] == "+30.0 [-11.8, 60.1], p=0.375"  # against LM
    assert copa[0].endswith("p=0.016")  # against Unc: 7 vs 0 discordant, p = 2 / 2**7
    assert differences["dcpmi_cb"][0].endswith("p=0.002")  # 10 vs 0: p = 2 / 2**10


@pytest.mark.fast
def test_best_marks_say_whether_the_lead_is_significant(tmp_path):
    (run,) = load_results([ten_document_run(tmp_path)])
    table = md_rows(report.markdown_table(run))
    # copa: DC-PMI leads LM, Avg and Char (tied runners-up) with p = 0.375: no dagger.
    assert table["dcpmi_copa"][5] == "**70.0**"
    # cb: 10 of 10 against 0 of 10, p = 2 / 2**10: significant.
    assert table["dcpmi_cb"][5] == "**100.0**†"
    assert "†: the best method's lead over the runner-up is significant" in (
        report.markdown_report([run])
    )
    rows = {r["task"]: r for r in csv.DictReader(io.StringIO(report.csv_report([run])))}
    assert (rows["dcpmi_copa"]["lead_p"], rows["dcpmi_cb"]["lead_p"]) == ("0.375", "0.002")


@pytest.mark.fast
def test_intervals_csv(tmp_path):
    path = ten_document_run(tmp_path)
    assert report_command([str(path)], str(tmp_path / "out"), ["csv"]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "intervals.csv").read_text())))
    by_key = {(r["task"], r["method"]): r for r in rows}
    assert len(rows) == 2 * len(METHODS)
    lm = by_key[("dcpmi_copa", "LM")]
    assert (lm["n"], lm["accuracy"], lm["low"], lm["high"]) == ("10", "40.0", "16.8", "68.7")
    assert (lm["dcpmi_minus"], lm["difference_low"], lm["difference_high"]) == (
        "30.0",
        "-11.8",
        "60.1",
    )
    assert (lm["mcnemar_p"], lm["dcpmi_only"], lm["method_only"]) == ("0.375", "4", "1")
    own = by_key[("dcpmi_copa", "DC-PMI")]
    assert (own["accuracy"], own["dcpmi_minus"], own["mcnemar_p"]) == ("70.0", "", "")


@pytest.mark.fast
def test_samples_of_another_run_are_not_used(tmp_path):
    path = ten_document_run(tmp_path)
    for samples in path.parent.glob("samples_*.jsonl"):
        samples.rename(samples.with_name(samples.name.replace(STAMP, "2026-02-02T00-00-00")))
    (run,) = load_results([path])
    assert not run.has_samples
    assert "Intervals and significance need the per-document samples" in (
        report.markdown_report([run])
    )
    assert report_command([str(path)], options_csv=str(tmp_path / "o.csv")) == 2


@pytest.mark.fast
def test_a_broken_samples_file_is_named(tmp_path):
    path = ten_document_run(tmp_path)
    broken = path.parent / f"samples_dcpmi_cb_{STAMP}.jsonl"
    broken.write_text('{"doc_id": 0}\nnot json\n')
    with pytest.raises(report.ReportError, match=rf"{broken}:2: not valid JSON at column"):
        load_results([path])


# ---------------------------------------------------------------------------
# Per-option export (hand-made)


def request_sample(doc_id, options, conditional, domain, gold, **logged) -> dict:
    """A DC-PMI sample as lm-eval's JSONL holds it: conditional requests, then domain ones."""
    pairs = [(" Premise", o) for o in options] + [(" the answer is:", o) for o in options]
    lls = conditional + domain
    values = scoring.accuracies(
        scoring.DocumentScores(conditional, {"domain": domain}, None, [len(o) for o in options]),
        gold,
        [m for m in scoring.METRICS if m.name in scoring.ACCURACIES],
    )
    return {
        "doc_id": doc_id,
        "target": str(gold),
        "arguments": {
            f"gen_args_{i}": {"arg_0": context, "arg_1": option}
            for i, (context, option) in enumerate(pairs)
        },
        "filtered_resps": [[str(ll), "False"] for ll in lls],
        "filter": "none",
        **values,
        **logged,
    }


@pytest.mark.fast
def test_options_export_without_a_tokenizer(tmp_path, capsys):
    samples = [
        # Unc picks " bb" (-0.5 > -2.0); LM (-1.0), Char (-0.5 per character against -1.0)
        # and DC-PMI (-1.0 + 2.0 = 1.0 against -3.0 + 0.5 = -2.5) pick " a".
        request_sample(0, [" a", " bb"], [-1.0, -3.0], [-2.0, -0.5], gold=1),
        # The logged LM value is wrong on purpose: the export says so.
        request_sample(1, [" x", " y", " z"], [-2.0, -1.0, -3.0], [-1.0, -1.0, -1.0], 1, acc=0.0),
    ]
    # The results hold the logged values' means, as lm-eval computes them (the report
    # refuses samples whose means are not the results' accuracies).
    mean = {m: sum(s[m] for s in samples) / len(samples) for m in METHODS}
    values = [mean[m] for m in ("acc_unc", "acc", "acc_avg", "acc_dcpmi")]
    data = results_dict({"dcpmi_copa": entry(*values, n=2, norm=mean["acc_norm"])})
    data["config"]["model_args"] = {}  # no tokenizer named: the tokens column stays empty
    data["configs"] = {"dcpmi_copa": {"target_delimiter": ""}}  # characters: the whole option
    path = write_run(tmp_path / "m", data, {"dcpmi_copa": samples})
    target = tmp_path / "options.csv"
    assert report_command([str(path)], options_csv=str(target)) == 0
    err = capsys.readouterr().err
    assert f"dcpmi report: wrote {target} (5 options of 1 task(s))" in err
    assert "dcpmi_copa: the tokens column is empty: the results name no tokenizer" in err
    assert "warning: dcpmi_copa: the exported LM pick disagrees with the logged acc on 1" in err
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [(r["doc_id"], r["option"], r["text"]) for r in rows[:2]] == [
        ("0", "0", " a"),
        ("0", "1", " bb"),
    ]
    first = rows[0]
    assert (first["conditional_loglikelihood"], first["domain_loglikelihood"]) == ("-1.0", "-2.0")
    assert (first["tokens"], first["characters"], first["gold"]) == ("", "2", "0")
    picks = {r["option"]: [r[f"chosen_{looks.metric_label(m)}"] for m in PAPER] for r in rows[:2]}
    # Unc, LM, Avg (no token counts: empty), Char, DC-PMI
    assert picks == {"0": ["0", "1", "", "1", "1"], "1": ["1", "0", "", "0", "0"]}


@pytest.mark.fast
def test_gold_given_as_option_text():
    from lm_eval_dcpmi.report._samples import document_options

    sample = request_sample(0, [" no", " yes"], [-1.0, -2.0], [-1.0, -1.0], gold=1)
    sample["target"] = "yes"  # a doc_to_target that returns the option text
    assert document_options(sample, "x").gold == 1
    sample["arguments"].pop("gen_args_3")
    with pytest.raises(report.ReportError, match="x: doc 0 has 3 requests and 4 responses"):
        document_options(sample, "x")


def test_responses_as_each_lm_eval_release_logs_them():
    """0.4 logs [ll, is_greedy] per request, 0.5 one such pair per repeat: [[ll, is_greedy]]."""
    from lm_eval_dcpmi.report._samples import document_options

    sample = request_sample(0, [" no", " yes"], [-1.0, -2.0], [-1.5, -0.5], gold=1)
    release_04 = document_options(sample, "x")
    sample["filtered_resps"] = [[response] for response in sample["filtered_resps"]]
    assert document_options(sample, "x") == release_04
    assert (release_04.conditional, release_04.domain) == ([-1.0, -2.0], [-1.5, -0.5])


# ---------------------------------------------------------------------------
# The real lm_eval run of conftest (samples logged)


@pytest.mark.slow
def test_real_options_export_reproduces_the_logged_metrics(lm_eval_run, tmp_path, capsys):
    target = tmp_path / "options.csv"
    out = tmp_path / "out"
    assert report_command([str(lm_eval_run.output_dir)], str(out), ["csv"], options_csv=target) == 0
    err = capsys.readouterr().err
    assert "warning" not in err and "tokens column is empty" not in err
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    by_doc: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        by_doc.setdefault((row["task"], int(row["doc_id"])), []).append(row)
    tasks = sorted({task for task, _doc in by_doc})
    assert tasks and all(t in lm_eval_run.results["results"] for t in tasks)
    for task in tasks:
        for sample in lm_eval_run.samples(task):
            options = by_doc[(task, sample["doc_id"])]
            layout = task_layout(lm_eval_run.results["configs"][task])
            continuations = [a["arg_1"] for a in sample["arguments"].values()]
            blocks = layout.blocks(
                [float(r[0]) for r in sample["filtered_resps"]], *layout.n_options(continuations)
            )
            conditional, domain = blocks.conditional, blocks.domain
            assert [float(o["conditional_loglikelihood"]) for o in options] == conditional
            assert [float(o["domain_loglikelihood"]) for o in options] == domain
            assert all(int(o["tokens"]) >= 1 for o in options)
            (gold,) = [o for o in options if o["gold"] == "1"]
            for method, label in looks.LABELS.items():
                # exactly one pick per method, right exactly when lm-eval logged 1.0
                assert sum(int(o[f"chosen_{label}"]) for o in options) == 1
                assert float(gold[f"chosen_{label}"]) == sample[method], (task, method)
    # intervals.csv: the accuracies are the results file's.
    intervals = list(csv.DictReader(io.StringIO((out / "intervals.csv").read_text())))
    for row in intervals:
        method = next(m for m, label in looks.LABELS.items() if label == row["method"])
        value = lm_eval_run.results["results"][row["task"]][f"{method},none"]
        assert float(row["accuracy"]) == pytest.approx(100 * value, abs=0.05)
