"""What the fuzz tier (tests/test_fuzz.py, scripts/fuzz.sh) found, each kept as a plain test:
a genuine run's file changed the way the fuzzer changed it, and the command that ended in a
traceback, split its refusal over lines or accepted a changed number now refuses it in one
line that names the file and what is wrong (or, where the case is sound, accepts it).

The genuine files: the committed full CB run (``results/full``, compact samples; the report
needs no data, so those tests are fast), and ``conftest.shard_runs`` (CB in 3 shards, samples
in full) for ``dcpmi merge`` and ``dcpmi verify``.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ROOT, SHARDED_TASK

from lm_eval_dcpmi import cli
from lm_eval_dcpmi._json_files import parse_json
from lm_eval_dcpmi.errors import printable
from lm_eval_dcpmi.report._results import ReportError

COMMITTED = ROOT / "results" / "full" / "results_2026-12-04T01-17-37.593269.json"
COMMITTED_SAMPLES = COMMITTED.with_name("samples_dcpmi_cb_2026-12-04T01-17-37.593269.jsonl.gz")


def committed_run(tmp_path: Path) -> Path:
    """A copy of the committed CB run: its folder."""
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(COMMITTED, folder)
    shutil.copy(COMMITTED_SAMPLES, folder)
    return folder


def edit_results(folder: Path, edit: Callable[[dict], None]) -> None:
    (path,) = folder.rglob("results_*.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def edit_samples(folder: Path, edit: Callable[[list[dict]], None]) -> None:
    (path,) = folder.rglob("samples_*.jsonl*")
    opened = gzip.open if path.suffix == ".gz" else open
    with opened(path, "rt", encoding="utf-8") as file:
        lines = [json.loads(line) for line in file.read().splitlines()]
    edit(lines)
    with opened(path, "wt", encoding="utf-8") as file:
        file.write("".join(json.dumps(line) + "\n" for line in lines))


def run(capsys, *argv: object) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refused(capsys, command: str, *argv: object, status: int = 2) -> str:
    """``dcpmi COMMAND ARGV`` refuses in one line (every stderr line its own, for verify);
    the refusal's text."""
    got, _out, err = run(capsys, command, *argv)
    assert got == status, err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(f"dcpmi {command}: ") for line in lines), err
    if command != "verify":
        assert len(lines) == 1, err
    return err


# ---------------------------------------------------------------- report (fast: no data)


def _item_negative(lines: list[dict]) -> None:
    lines[9]["acc_bc"][1] -= 1


def _item_shorter(lines: list[dict]) -> None:
    del lines[31]["acc_bc"][1]


def _metric_dropped(lines: list[dict]) -> None:
    del lines[28]["acc_unc"]


def _loglikelihood_positive(lines: list[dict]) -> None:
    lines[21]["filtered_resps"][4][0] = 3.809266209661986e16


def _answer_wrapped(lines: list[dict]) -> None:
    lines[7]["filtered_resps"][3] = {"value": lines[7]["filtered_resps"][3]}


@pytest.mark.fast
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_item_negative, "is not an item of probabilities and the gold option's index"),
        (_item_shorter, "(sample 32) logs an item of another size for acc_bc"),
        (_metric_dropped, "(sample 29) logs no acc_unc, unlike the other documents"),
        (_loglikelihood_positive, "(a loglikelihood is a number, 0 or below)"),
        (_answer_wrapped, "are not [loglikelihood, is_greedy] answers"),
        (lambda lines: lines[51].update(acc_cc=2048847968), "its acc_cc 2048847968 is not 0 or 1"),
        (lambda lines: lines.clear(), "holds no samples (an empty samples file)"),
        (  # was KeyError: 'acc_bc' (the items' sizes read off a first line that lacks them)
            lambda lines: lines.insert(0, {"doc_id": 0}),
            "doc 0 (sample 1) logs no acc, unlike the other documents",
        ),
        (  # '¹'.isdigit() holds, but int('¹') fails: was ValueError (found by grep, the
            # sixth run's target '¹' in merge)
            lambda lines: lines[3].update(doc_id="\u00b9"),
            "doc_id '\u00b9' is not a document index",
        ),
        (  # was UnicodeEncodeError hashing the document (the eighth run, in verify and report)
            lambda lines: lines[4].update(doc={"premise": "\ud800"}),
            "a lone surrogate in its doc, text that is no UTF-8 and lm-eval cannot write",
        ),
    ],
)
def test_the_report_refuses_samples_shaped_as_no_run_logs_them(tmp_path, capsys, edit, message):
    folder = committed_run(tmp_path)
    edit_samples(folder, edit)
    err = refused(capsys, "report", folder, "--out", tmp_path / "out", "--format", "csv")
    assert message in err and COMMITTED_SAMPLES.name in err
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
def test_a_gzip_file_broken_inside_is_refused_in_one_line(tmp_path, capsys):
    folder = committed_run(tmp_path)
    path = folder / COMMITTED_SAMPLES.name
    data = path.read_bytes()
    path.write_bytes(data[:1137] + b"\xff" + data[1137:])  # the fuzzer's case: zlib.error
    err = refused(capsys, "report", folder, "--format", "csv")
    assert "cannot be read as a samples file (Error -3 while decompressing data" in err


@pytest.mark.fast
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(task_hashes="then"), None),  # was AttributeError: a string
        (
            lambda d: d["results"]["dcpmi_cb"].update({"truncated,none": [[0.0]]}),
            "dcpmi_cb's truncated,none is [[0.0]], not a value of its metric",
        ),
        (
            lambda d: d["results"]["dcpmi_cb"].update({"truncated,none": -1.4112346679524156e195}),
            "dcpmi_cb's truncated,none is -1.4112346679524156e+195, not a value of its metric",
        ),
        (
            lambda d: d.update({"n-samples": {"value": d["n-samples"]}}),
            "n-samples dcpmi_cb is None, not its counts (original, effective)",
        ),
        (
            lambda d: d["n-samples"]["dcpmi_cb"].pop("original"),
            "n-samples dcpmi_cb original is None, not a count",
        ),
        (
            lambda d: d["n-samples"]["dcpmi_cb"].update(original=55),
            "n-samples dcpmi_cb effective is 56, not within original",
        ),
        (
            lambda d: d["n-samples"].update(dcpmi_cb=-2305843009213693953),
            "n-samples dcpmi_cb is -2305843009213693953, not its counts",
        ),
        (
            lambda d: d["n-samples"]["dcpmi_cb"].update(original=True),
            "n-samples dcpmi_cb original is True, not a count",
        ),
        (  # was accepted: a count the report shows, which the documents do not give
            lambda d: d["results"]["dcpmi_cb"].update({"truncated,none": 11256}),
            "its per-document truncated add up to 0, but the results file reports 11256",
        ),
        (  # was OverflowError: cannot convert float infinity to integer
            lambda d: d["n-samples"]["dcpmi_cb"].update(original=float("-inf")),
            "n-samples dcpmi_cb original is -inf, not a count",
        ),
        (  # was a blank cell
            lambda d: d["results"]["dcpmi_cb"].pop("truncated,none"),
            "dcpmi_cb's truncated is not reported, though the task's metric_list names it",
        ),
    ],
)
def test_the_report_refuses_a_results_value_it_would_leave_blank(tmp_path, capsys, edit, message):
    folder = committed_run(tmp_path)
    edit_results(folder, edit)
    if message is None:  # nothing the report reads: the report as the genuine run's
        status, _out, err = run(capsys, "report", folder, "--format", "csv", "--out", tmp_path)
        assert status == 0, err
        assert "44.6,44.6,37.5,42.9" in (tmp_path / "report.csv").read_text()
        return
    assert message in refused(capsys, "report", folder, "--format", "csv")


@pytest.mark.fast
def test_a_folder_whose_only_results_file_is_broken_is_refused_in_one_line(tmp_path, capsys):
    folder = committed_run(tmp_path)
    (folder / COMMITTED.name).write_text("")
    err = refused(capsys, "report", folder, "--format", "csv")
    assert "no DC-PMI results under this folder (1 results file(s) skipped; first: " in err


@pytest.mark.fast
def test_names_read_from_files_are_printed_on_one_line():
    assert printable("task 'line\nbreak' and 'nul\x00' and '\ud800'") == (
        "task 'line\\nbreak' and 'nul\\x00' and '\\ud800'"
    )


@pytest.mark.fast
def test_an_integer_of_thousands_of_digits_is_not_json_a_run_wrote():
    with pytest.raises(ReportError, match=r"x.jsonl:3: holds an integer of thousands of digits"):
        parse_json("[" + "1" * 5000 + "]", "x.jsonl", line=3, error=ReportError)


# ---------------------------------------------------------------- verify (the data)


def _whole(shard_runs, tmp_path: Path) -> Path:
    return shutil.copytree(shard_runs["whole"], tmp_path / "whole")


def _set_result(key: str, value: object) -> Callable[[dict], None]:
    return lambda data: data["results"][SHARDED_TASK].update({key: value})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _set_result("unranked_stderr,none", 3079),
            '(dcpmi_cb, unranked_stderr,none): 3079 is a standard error, but lm-eval writes "N/A"',
        ),
        (
            _set_result("truncated,none", 1.0),
            "(dcpmi_cb, truncated): reports 1; the logged documents give 0",
        ),
        (
            lambda data: data["n-samples"].update(dcpmi_cb=-2305843009213693953),
            "its n-samples entry -2305843009213693953 is not the documents scored",
        ),
        (
            _set_result("acc_norm_stderr,none", 10**400),  # was OverflowError
            "(dcpmi_cb, acc_norm_stderr,none): 1000000000",
        ),
        (  # was accepted: a file written before the count existed lacks it, but not its listing
            lambda data: data["results"][SHARDED_TASK].pop("truncated,none"),
            "(dcpmi_cb, truncated): is not reported, though the task's metric_list names it "
            "(lm-eval writes each)",
        ),
        (
            lambda data: data["results"][SHARDED_TASK].pop("pma,none"),
            "(dcpmi_cb, pma): is not reported, though the task's metric_list names it",
        ),
        (  # was accepted (the sixth run): a reader takes it for the metric, nothing checked it
            _set_result("acc_dcpmi,other", 0.5),
            "(dcpmi_cb, acc_dcpmi,other): 0.5 is reported under the filter 'other'; a DC-PMI "
            "task has lm-eval's one multiple-choice filter, none, so no run wrote it",
        ),
        (
            _set_result("acc_dcpmi,", 0.99),
            "(dcpmi_cb, acc_dcpmi,): 0.99 is reported under the filter ''",
        ),
        (  # was accepted (the seventh run): a metric no table or metric_list names
            _set_result("acc_fake,none", ""),
            "(dcpmi_cb, acc_fake,none): '' is reported for a metric that neither the plugin's "
            "metric table nor the task's metric_list names, so no run wrote it",
        ),
        (  # was accepted (the ninth run): a standard error hidden as lm-eval's "N/A"
            _set_result("acc_unc_stderr,none", "N/A"),
            '(dcpmi_cb, acc_unc): reports its standard error as "N/A", which lm-eval writes '
            "only for one document or with --bootstrap_iters 0, but the run's config records "
            "bootstrap_iters 100000; the recomputed documents give 0.0",
        ),
        (  # was a traceback (the ninth run): random.sample in lm-eval's few-shot sampler
            lambda data: data["n-shot"].update(dcpmi_cb=184),
            "dcpmi_cb: its n-shot records 184 examples a document, which lm-eval cannot draw "
            "from the task's few-shot documents (Sample larger than population",
        ),
    ],
)
def test_verify_refuses_a_count_or_standard_error_no_run_reports(
    shard_runs, tmp_path, capsys, edit, message
):
    folder = _whole(shard_runs, tmp_path)
    edit_results(folder, edit)
    assert message in refused(capsys, "verify", folder, status=1)


@pytest.mark.slow
def test_verify_accepts_standard_errors_of_na_from_a_run_without_bootstrapping(
    shard_runs, tmp_path, capsys
):
    def without_bootstrapping(data: dict) -> None:  # lm_eval --bootstrap_iters 0 writes this
        data["config"]["bootstrap_iters"] = 0
        entry = data["results"][SHARDED_TASK]
        entry.update({key: "N/A" for key in entry if key.endswith("_stderr,none")})

    folder = _whole(shard_runs, tmp_path)
    edit_results(folder, without_bootstrapping)
    status, out, err = run(capsys, "verify", folder)
    assert status == 0, err
    assert "every number recomputes" in out


def _metadata(key: str, value: object) -> Callable[[dict], None]:
    return lambda data: data["configs"][SHARDED_TASK]["metadata"].update({key: value})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda data: data["n-shot"].update(dcpmi_cb=[0]),
            "(dcpmi_cb): its n-shot [0] is not a number of few-shot examples",
        ),
        (
            _metadata("domain_premise", 165686),
            "records domain_premise 165686, but the task built here has ' the answer is:'",
        ),
        (
            _metadata("data_files", {"cb/val.jsonl": {"value": "c6125587e960"}}),
            "data file cb/val.jsonl: the file here has sha256 c6125587e9601560..., but the run "
            "read {'value': 'c61",
        ),
        (
            _metadata("dcpmi_version", ["0.1.0"]),  # was TypeError: unhashable type: 'list'
            None,
        ),
        (
            lambda data: data.update(system_instruction=[None]),  # was AttributeError
            "cannot be built again here: its system_instruction is [None], not text",
        ),
        (
            lambda data: data["results"][SHARDED_TASK].pop("acc_avg_stderr,none"),
            "(dcpmi_cb, acc_avg): reports no standard error (lm-eval writes one)",
        ),
    ],
)
def test_verify_and_export_refuse_or_keep_what_the_metadata_records(
    shard_runs, tmp_path, capsys, edit, message
):
    folder = _whole(shard_runs, tmp_path)
    edit_results(folder, edit)
    export = ["export", folder, "--format", "hf", "--out", tmp_path / "out"]
    if message is None:  # the results' dcpmi.plugin_version names the version: as recorded
        for argv in (["verify", folder], export):
            status, _out, err = run(capsys, *argv)
            assert status == 0, err
        return
    assert message in refused(capsys, "verify", folder, status=1)
    assert message in refused(capsys, *export)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_export_refuses_a_target_delimiter_that_is_no_text(shard_runs, tmp_path, capsys):
    """Was TypeError (``str.startswith`` of a float) in eee's per-document rows."""
    folder = _whole(shard_runs, tmp_path)
    edit_results(folder, lambda d: d["configs"][SHARDED_TASK].update(target_delimiter=1.8e308))
    assert "target_delimiter" in refused(capsys, "verify", folder, status=1)
    export = ["export", folder, "--format", "eee", "--out", tmp_path / "out"]
    assert "target_delimiter" in refused(capsys, *export)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_verify_refuses_a_batch_calibration_item_its_loglikelihoods_do_not_give(
    shard_runs, tmp_path, capsys
):
    folder = _whole(shard_runs, tmp_path)
    edit_samples(folder, lambda lines: lines[9]["acc_bc"].__setitem__(0, 0.45))
    err = refused(capsys, "verify", folder, status=1)
    assert "doc 9: acc_bc logs the item [0.45, " in err
    assert "but the logged loglikelihoods give [0.43" in err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["line\nbreak", "\ud800"])
def test_a_task_name_that_is_no_line_is_shown_escaped(shard_runs, tmp_path, capsys, name):
    folder = _whole(shard_runs, tmp_path)
    (path,) = folder.rglob("results_*.json")
    text = path.read_text().replace(json.dumps(SHARDED_TASK), json.dumps(name))
    path.write_text(text)
    status, out, err = run(capsys, "verify", folder)
    assert status == 1, err
    shown = printable(name)
    assert f"note: {shown}: not an installed task" in out
    assert all(line.startswith("dcpmi verify: ") for line in err.strip().splitlines()), err
    assert f"({shown}): no samples file beside the results file" in err


# ---------------------------------------------------------------- merge (the shards)


def _shards(shard_runs, tmp_path: Path) -> list[Path]:
    return [shutil.copytree(shard_runs[f"{k}of3"], tmp_path / f"{k}of3") for k in (1, 2, 3)]


def _arguments_int(lines: list[dict]) -> None:
    lines[5]["arguments"]["gen_args_5"] = 5


def _continuation_int(lines: list[dict]) -> None:
    lines[2]["arguments"]["gen_args_0"]["arg_1"] = 3


def _answer_empty(lines: list[dict]) -> None:
    lines[0]["filtered_resps"][11] = ""


def _item_text(lines: list[dict]) -> None:
    lines[0]["acc_bc"][2] = str(lines[0]["acc_bc"][2])


def _argument_surrogate(lines: list[dict]) -> None:
    lines[17]["arguments"]["gen_args_4"]["arg_0"] = "\ud800"  # was TypeError in the tokenizer


def _doc_surrogate(lines: list[dict]) -> None:
    lines[3]["doc"]["premise"] = "\ud800"  # was UnicodeEncodeError hashing the document


def _metric_name_surrogate(lines: list[dict]) -> None:
    lines[6]["metrics"][9] = "\ud800"  # was written back by merge as it was read


def _key_surrogate(lines: list[dict]) -> None:
    lines[8]["\udc80"] = 1


def _target_superscript(lines: list[dict]) -> None:
    lines[5]["target"] = "\u00b9"  # was ValueError: int('¹')


def _hash_surrogate(lines: list[dict]) -> None:
    lines[4]["target_hash"] = "\ud800"  # was UnicodeEncodeError hashing the merged task


def _argument_key(lines: list[dict]) -> None:
    arguments = lines[0]["arguments"]
    arguments["x/../y"] = arguments["gen_args_11"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_arguments_int, "are not (context, continuation) requests"),
        (_continuation_int, "are not (context, continuation) requests"),
        (_argument_key, "are not (context, continuation) requests"),
        (_answer_empty, "are not [loglikelihood, is_greedy] answers"),
        (_item_text, "is not an item of probabilities and the gold option's index"),
        (_argument_surrogate, "a lone surrogate in its arguments, text that is no UTF-8"),
        (_doc_surrogate, "a lone surrogate in its doc, text that is no UTF-8 and lm-eval"),
        (_metric_name_surrogate, "a lone surrogate in its metrics, text that is no UTF-8"),
        (_key_surrogate, "a lone surrogate in its '\\udc80', text that is no UTF-8"),
        (_target_superscript, "doc 16: its target names no option"),
        (_hash_surrogate, "a lone surrogate in its target_hash, text that is no UTF-8"),
        (
            lambda lines: lines[4].update(doc_hash="ABC"),
            "its doc_hash 'ABC' is not a sha256 digest (64 hex digits, lm-eval's)",
        ),
    ],
)
def test_merge_refuses_samples_shaped_as_no_run_logs_them(
    shard_runs, tmp_path, capsys, edit, message
):
    shards = _shards(shard_runs, tmp_path)
    edit_samples(shards[1], edit)
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert message in err and "samples_dcpmi_cb_" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["results"][SHARDED_TASK].pop("acc_dcpmi,none"),
            "(dcpmi_cb): reports no acc_dcpmi,none, which shard 2/3 (",
        ),
        (
            lambda d: d["results"].update(dcpmi_imaginary=d["results"][SHARDED_TASK]),
            "its results hold 'dcpmi_imaginary', which is neither a DC-PMI task nor a group",
        ),
        (
            lambda d: d["n-samples"].update({"x/../y": d["n-samples"][SHARDED_TASK]}),
            "its n-samples count documents of 'x/../y', which its results do not hold",
        ),
        (
            lambda d: d.update(task_hashes=[d["task_hashes"]]),
            "its task_hashes is list, not an object",
        ),
    ],
)
def test_merge_refuses_what_it_would_copy_from_one_shard(
    shard_runs, tmp_path, capsys, edit, message
):
    shards = _shards(shard_runs, tmp_path)
    edit_results(shards[0], edit)
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert message in err and "shard 1/3 (" in err


@pytest.mark.slow
def test_merge_refuses_a_document_without_its_batch_calibration_item(shard_runs, tmp_path, capsys):
    shards = _shards(shard_runs, tmp_path)
    edit_samples(shards[1], lambda lines: lines[13].pop("acc_bc"))  # was KeyError: 'acc_bc'
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert "shard 2/3 (" in err and "doc 40: logs no acc_bc" in err


@pytest.mark.slow
def test_merge_refuses_a_model_identity_without_its_source(shard_runs, tmp_path, capsys):
    shards = _shards(shard_runs, tmp_path)
    edit_results(shards[1], lambda data: data["dcpmi"]["model"].pop("how"))  # was TypeError
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert "dcpmi.model records no 'how', which every results file of the plugin records" in err


@pytest.mark.slow
def test_merge_refuses_a_task_config_whose_metadata_is_no_object(shard_runs, tmp_path, capsys):
    shards = _shards(shard_runs, tmp_path)
    edit_results(shards[1], lambda data: data["configs"][SHARDED_TASK].update(metadata=1e308))
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")  # was TypeError
    assert "holds no DC-PMI task (tasks: dcpmi_cb)" in err


@pytest.mark.slow
def test_merge_refuses_a_task_name_lm_eval_could_not_look_up(shard_runs, tmp_path, capsys):
    shards = _shards(shard_runs, tmp_path)  # was UnicodeEncodeError, from lm-eval's index
    (path,) = shards[2].rglob("results_*.json")
    path.write_text(path.read_text().replace(json.dumps(SHARDED_TASK), json.dumps("\ud800")))
    err = refused(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert "(\\ud800): names no task lm-eval could look up; no run of dcpmi run" in err


@pytest.mark.slow
def test_merge_output_with_a_line_separator_inside_a_text_is_read_back(
    shard_runs, tmp_path, capsys
):
    # the tenth run: U+0085 inside a logged text, written unescaped as lm-eval writes it,
    # split the line where str.splitlines() read the merged samples (a JSONDecodeError)
    shards = _shards(shard_runs, tmp_path)
    edit_samples(shards[0], lambda lines: lines[9]["metrics"].__setitem__(8, "a\x85b\u2028c"))
    status, _out, err = run(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert status == 0, err
    (merged,) = (tmp_path / "out").rglob("samples_*.jsonl")
    assert "a\x85b\u2028c" in merged.read_text(encoding="utf-8")  # unescaped, as lm-eval's
    status, out, err = run(capsys, "verify", merged.parent)
    assert status == 0, err


@pytest.mark.slow
def test_merge_keeps_a_gold_index_written_as_negative_zero(shard_runs, tmp_path, capsys):
    # The fifth run's one finding was the fuzzer's own: it compared a BC item as JSON text,
    # so a gold index -0.0 (the number 0) read as changed. merge accepts it, every number equal.
    shards = _shards(shard_runs, tmp_path)
    (path,) = shards[2].rglob("samples_*.jsonl")
    before = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    edit_samples(shards[2], lambda lines: lines[15]["acc_bc"].__setitem__(-1, -0.0))
    status, _out, err = run(capsys, "merge", *shards, "--out", tmp_path / "out")
    assert status == 0, err
    (merged,) = (tmp_path / "out").rglob("samples_*.jsonl")
    lines = [json.loads(line) for line in merged.read_text(encoding="utf-8").splitlines()]
    doc = next(line for line in lines if line["doc_id"] == before[15]["doc_id"])
    assert doc["acc_bc"] == before[15]["acc_bc"] and before[15]["acc_bc"][-1] == 0.0


@pytest.mark.fast
def test_the_fuzz_oracle_compares_an_item_number_by_number():
    from fuzz_helpers import _claimed, differences

    key = ("samples", "dcpmi_cb", 47, "acc_bc")
    item = [0.4367994120985781, 0.5574317338250127, 0.005768854076409251, 0.0]
    assert differences({key: _claimed(item)}, {key: _claimed([*item[:3], -0.0])}) == []
    assert differences({key: _claimed(item)}, {key: _claimed([*item[:3], 1.0])}) != []
    assert differences({key: _claimed(item)}, {key: _claimed(item[:3])}) != []
    assert differences({key: _claimed(item)}, {key: _claimed([*item[:3], "x"])}) != []
