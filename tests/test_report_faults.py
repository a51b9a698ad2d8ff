"""`dcpmi report` faults: a samples file that does not match its results file, JSON errors
with their position, and --out written all or nothing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from helpers import read_only_file_system
from report_helpers import STAMP, entry, results_dict, ten_document_run

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report._loading import SamplesError, load_results
from lm_eval_dcpmi.report._output import Output, report_command, text_output, write_all
from lm_eval_dcpmi.report._results import ReportError

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast


def cut_samples(results_file: Path, task: str, keep: int) -> Path:
    """Keep the first ``keep`` lines of ``task``'s samples file (an interrupted write)."""
    path = results_file.with_name(f"samples_{task}_{STAMP}.jsonl")
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))
    return path


# ------------------------------------------------------------------ samples vs results


def test_fewer_samples_than_results_is_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = cut_samples(path, "dcpmi_cb", 6)
    message = (
        f"{samples}: 6 documents of dcpmi_cb, but {path} reports n=10; the files are not from "
        "one complete run (an interrupted or edited samples file?). Rerun with --log_samples, "
        "or move the samples file away to report without intervals."
    )
    with pytest.raises(SamplesError) as caught:
        load_results([path])
    assert str(caught.value) == message
    assert report_command([str(path)], str(tmp_path / "out")) == 2
    assert capsys.readouterr() == ("", f"dcpmi report: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_folder_does_not_fall_back_to_an_older_run_on_broken_samples(tmp_path):
    path = ten_document_run(tmp_path)  # tmp_path/gpt2/results_<STAMP>.json
    older = path.with_name("results_2025-01-01T00-00-00.json")
    older.write_text(json.dumps(results_dict({"dcpmi_copa": entry(0.1, 0.2, 0.3, 0.4, n=10)})))
    cut_samples(path, "dcpmi_copa", 9)
    with pytest.raises(SamplesError, match="9 documents of dcpmi_copa, but .* reports n=10"):
        load_results([tmp_path])


def test_matching_samples_still_load(tmp_path):
    (run,) = load_results([ten_document_run(tmp_path)])
    assert {row.task: len(row.per_doc["acc"]) for row in run.rows} == {
        "dcpmi_copa": 10,
        "dcpmi_cb": 10,
    }


# ------------------------------------------------------------------ JSON errors, with position


def test_results_file_json_error_gives_line_and_column(tmp_path):
    path = tmp_path / "results_x.json"
    path.write_text('{"results": {\n  "dcpmi_copa": {"acc,none": 0.5,}\n}}\n')
    with pytest.raises(ReportError) as caught:
        load_results([path])
    assert str(caught.value) == (
        f"{path}:2: not valid JSON at column 34 (Expecting property name enclosed in double "
        "quotes); an lm-eval results file (results_<date>.json) is one JSON object."
    )


def test_json_error_ending_in_at_is_not_at_at_column(tmp_path, capsys):
    path = tmp_path / "results_x.json"
    path.write_text('{"results": {"dcpmi_copa": "cut')  # cut short
    assert cli.main(["report", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"dcpmi report: error: {path}:1: not valid JSON at column 28 (Unterminated string "
        "starting at); an lm-eval results file (results_<date>.json) is one JSON object.\n"
    )


def test_samples_line_json_error_gives_column(tmp_path):
    path = ten_document_run(tmp_path)
    broken = path.with_name(f"samples_dcpmi_cb_{STAMP}.jsonl")
    broken.write_text('{"doc_id": 0}\n{"doc_id": 1, "acc": }\n')
    with pytest.raises(ReportError) as caught:
        load_results([path])
    assert str(caught.value) == f"{broken}:2: not valid JSON at column 22 (Expecting value)."


# ------------------------------------------------------------------ --out: all or nothing


def test_out_with_a_folder_in_the_way_writes_nothing(tmp_path, capsys):
    path = ten_document_run(tmp_path / "runs")
    out = tmp_path / "out"
    (out / "report.csv").mkdir(parents=True)
    (out / "report.md").write_text("the previous report\n")
    assert report_command([str(path)], str(out), ["md", "csv"]) == 2
    assert capsys.readouterr().err == (
        f"dcpmi report: error: {out / 'report.csv'} is a folder; remove or rename it, or "
        "write elsewhere (nothing was written)\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["report.csv", "report.md"]
    assert (out / "report.md").read_text() == "the previous report\n"


def test_out_that_is_a_file_is_refused_before_the_report_is_printed(tmp_path, capsys):
    path = ten_document_run(tmp_path / "runs")
    out = tmp_path / "out"
    out.write_text("x")
    assert cli.main(["report", str(path), "--out", str(out), "--format", "md"]) == 2
    assert capsys.readouterr() == (
        "",  # no Markdown before the error
        f"dcpmi report: error: --out {out} is a file; give a folder (nothing was written)\n",
    )


def test_a_failing_export_leaves_no_out_folder(tmp_path, capsys):
    path = ten_document_run(tmp_path / "runs")
    out = tmp_path / "new" / "out"
    (tmp_path / "options.csv").mkdir()
    assert report_command([str(path)], str(out), ["md"], options_csv=tmp_path / "options.csv") == 2
    assert "options.csv is a folder" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_write_all_replaces_nothing_when_a_write_fails(tmp_path):
    (tmp_path / "a.md").write_text("old a\n")

    def fail(path: Path) -> None:
        path.write_text("half")
        raise OSError(28, "No space left on device")

    outputs = [text_output(tmp_path / "a.md", "new a\n"), Output(tmp_path / "b.png", fail)]
    with pytest.raises(ReportError, match=r"b\.png: cannot be written \(No space left on dev"):
        write_all(outputs, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]  # no temporary files
    assert (tmp_path / "a.md").read_text() == "old a\n"
    assert write_all(outputs[:1], tmp_path) == [tmp_path / "a.md"]
    assert (tmp_path / "a.md").read_text() == "new a\n"


# ------------------------------------------------------------------ a limit that cut nothing


def test_limit_that_left_every_task_whole_is_not_a_partial_run(tmp_path, capsys):
    rows = {"dcpmi_copa": entry(0.5, 0.5, 0.5, 1.0, n=2)}  # --limit 2 on 2 documents
    whole = tmp_path / "whole" / "results_x.json"
    whole.parent.mkdir()
    whole.write_text(json.dumps(results_dict(rows, limit=2)))
    assert cli.main(["report", str(whole)]) == 0
    assert "Partial run" not in capsys.readouterr().out
    cut = results_dict(rows, limit=2)
    cut["n-samples"]["dcpmi_copa"]["original"] = 3  # 2 of 3 documents
    partial = tmp_path / "partial" / "results_x.json"
    partial.parent.mkdir()
    partial.write_text(json.dumps(cut))
    assert cli.main(["report", str(partial)]) == 0
    assert (
        "**Partial run (--limit 2)**: not every document was scored (dcpmi_copa 2 of 3)"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize("value", [1.5, float("inf"), -0.25])
def test_an_impossible_accuracy_is_refused_not_printed(tmp_path, capsys, value):
    data = results_dict({"dcpmi_copa": entry(0.1, 0.2, 0.3, 0.4, n=10)})
    data["results"]["dcpmi_copa"]["acc_dcpmi,none"] = value
    path = tmp_path / f"results_{STAMP}.json"
    path.write_text(json.dumps(data))
    assert report_command([str(path)], str(tmp_path / "out")) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"dcpmi report: error: {path}: dcpmi_copa's acc_dcpmi is {value!r}, not an accuracy (a "
        "number from 0 to 1); the results file is damaged or edited (dcpmi verify says more)\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_folder_name_that_is_not_utf8_is_written_escaped(tmp_path, capsys):
    import os

    folder = tmp_path / os.fsdecode(b"run\xe9")  # a byte no UTF-8 text holds
    path = ten_document_run(folder)
    assert report_command([str(path)], str(tmp_path / "out")) == 0, capsys.readouterr().err
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "run\\udce9" in text


def test_results_nested_too_deep_are_one_line_for_report_verify_and_export(tmp_path, capsys):
    path = tmp_path / f"results_{STAMP}.json"
    path.write_text('{"results": ' + "[" * 200_000 + "]" * 200_000 + "}")
    export = ["export", str(path), "--format", "hf", "--out", str(tmp_path / "e")]
    for command in (["report", str(path)], ["verify", str(path)], export):
        status = cli.main(command)
        err = capsys.readouterr().err
        assert status == 2, command
        assert "RecursionError" not in err and "Traceback" not in err
        assert err.strip().endswith(
            "JSON nested too deeply to read (thousands of levels); not a file lm-eval wrote."
        )


def test_ctrl_c_in_report_is_one_line(tmp_path, capsys, monkeypatch):
    import lm_eval_dcpmi.report as command  # what `dcpmi report` calls

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "report_command", interrupted)
    assert (
        cli.main(["report", str(ten_document_run(tmp_path)), "--out", str(tmp_path / "o")]) == 130
    )
    assert capsys.readouterr().err == "\ndcpmi report: interrupted; no file was changed.\n"


# ------------------------------------------------------------------ what a path is, names


@contextlib.contextmanager
def at_most(seconds: int):
    """Fail the test instead of hanging (a FIFO waited on blocks forever)."""

    def timed_out(_signum, _frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_named_like_a_results_file_is_refused_by_every_command(tmp_path, capsys):
    fifo = tmp_path / "runs" / "gpt2" / f"results_{STAMP}.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    why = (
        f"{fifo}: a FIFO (named pipe), not a regular file; only files are read (replace it "
        "with the file lm-eval wrote, or move it away)."
    )
    runs, out = tmp_path / "runs", tmp_path / "out"
    commands = {
        "dcpmi verify: ": ["verify", str(runs)],
        "dcpmi merge: ": ["merge", str(runs), "--out", str(out)],
        "dcpmi export: ": ["export", str(runs), "--format", "hf", "--out", str(out)],
        "dcpmi report: error: ": ["report", str(fifo)],
    }
    for prefix, command in commands.items():
        with at_most(20):
            status = cli.main(command)
        assert (status, capsys.readouterr().err) == (2, f"{prefix}{why}\n"), command
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("..", "'..' is no file's name"),
        (".", "'.' is no file's name"),
        ("", "it is empty"),
        ("dcpmi_copa/../../../evil", "it holds '/'"),
        ("a\\b", "it holds '\\\\'"),
        ("a\0b", "it holds '\\x00'"),
        (7, "int, not text"),
    ],
)
def test_a_name_read_from_a_file_that_leads_out_of_its_folder_is_refused(name, problem):
    from lm_eval_dcpmi._json_files import checked_name

    with pytest.raises(DCPMIError) as refused:
        checked_name(name, "results.json", "the task name")
    assert str(refused.value) == (
        f"results.json: the task name {name!r} cannot name a file ({problem}); no run of "
        "lm-eval writes such a name: the file is edited or forged (name it with letters, "
        "digits, '_', '-' and '.')."
    )
    assert checked_name("dcpmi_copa", "x", "y") == "dcpmi_copa"
    assert checked_name("EleutherAI__pythia-160m", "x", "y") == "EleutherAI__pythia-160m"


def test_a_folder_that_cannot_be_made_writes_nothing_in_one_line(tmp_path, monkeypatch):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("x")
    outputs = [text_output(in_the_way / "out" / "a.md", "a\n")]
    with pytest.raises(ReportError) as refused:
        write_all(outputs, in_the_way / "out")
    assert str(refused.value) == (
        f"{in_the_way / 'out'}: cannot be created (Not a directory); give a folder that can "
        "be written (nothing was written)"
    )
    read_only_file_system(monkeypatch, tmp_path / "ro")
    with pytest.raises(ReportError, match=r"ro/out: cannot be created \(Read-only file sys"):
        write_all([text_output(tmp_path / "ro" / "out" / "a.md", "a\n")], tmp_path / "ro" / "out")
    assert list((tmp_path / "ro").iterdir()) == []
