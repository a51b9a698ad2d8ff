"""`dcpmi report` refuses a samples file that is not its results file's (another run's
with as many documents, repeated or missing doc ids, other prompts or another domain
premise), and `--out` stays all or nothing when moving a file into place fails."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from report_helpers import (
    STAMP,
    entry,
    metric_samples,
    results_dict,
    ten_document_run,
    write_run,
)

from lm_eval_dcpmi.report._loading import SamplesError, load_results
from lm_eval_dcpmi.report._output import report_command
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.task._premise_digest import premise_version

METHODS = tuple(scoring.METHODS)
MOVE_AWAY = (
    "Use the samples files written with this results file (the same date in their names), "
    "or move the samples file away to report without intervals."
)


def samples_path(results_file: Path, task: str) -> Path:
    return results_file.with_name(f"samples_{task}_{STAMP}.jsonl")


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def limited_run(tmp_path: Path, n_total: int, limit: float | None) -> Path:
    """``ten_document_run`` as if its 10 documents were chosen from ``n_total``, by
    ``--limit`` (the first ones) or, with ``limit`` None, by ``--samples``."""
    path = ten_document_run(tmp_path)
    data = json.loads(path.read_text())
    for counts in data["n-samples"].values():
        counts["original"] = n_total
    data["config"]["limit"] = limit
    path.write_text(json.dumps(data))
    return path


def refused(path: Path, capsys, message: str) -> None:
    """``dcpmi report`` refuses ``path``'s run with ``message``, one line, status 2."""
    with pytest.raises(SamplesError) as caught:
        load_results([path])
    assert str(caught.value) == message
    assert report_command([str(path)]) == 2
    assert capsys.readouterr() == ("", f"dcpmi report: error: {message}\n")


# ------------------------------------------------------------------ another run's samples


def test_samples_of_another_run_with_as_many_documents_are_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = samples_path(path, "dcpmi_copa")
    lines = read_lines(samples)
    for line in lines[:3]:  # another run: DC-PMI right on 3 more (or fewer) documents
        line["acc_dcpmi"] = 1.0 - line["acc_dcpmi"]
    write_lines(samples, lines)
    right = sum(line["acc_dcpmi"] for line in lines)
    assert right != 7
    refused(
        path, capsys,
        f"{samples} (dcpmi_copa, beside {path}): its per-document acc_dcpmi averages "
        f"{right / 10:.6g} ({int(right)} of 10 documents right), but the results file "
        f"reports 0.7; the samples are another run's (or edited). {MOVE_AWAY}",
    )  # fmt: skip


def test_repeated_doc_id_is_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    lines[9]["doc_id"] = 4  # 10 lines, doc 4 twice and doc 9 missing: the same means
    write_lines(samples, lines)
    refused(
        path, capsys,
        f"{samples} (dcpmi_cb, beside {path}): doc_id 4 appears 2 times; a samples file "
        f"holds each document once. {MOVE_AWAY}",
    )  # fmt: skip


def test_missing_doc_id_is_refused(tmp_path, capsys):
    path = limited_run(tmp_path, n_total=20, limit=10.0)  # --limit 10 of 20 documents
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    lines[3]["doc_id"] = 15  # documents 0-9 were scored; 15 was not
    write_lines(samples, lines)
    refused(
        path, capsys,
        f"{samples} (dcpmi_cb, beside {path}): doc_id 3 is missing (1 of the first 10 "
        f"documents the run scored are); the samples are not this run's documents. "
        f"{MOVE_AWAY}",
    )  # fmt: skip


def test_doc_id_beyond_the_task_is_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    lines[3]["doc_id"] = 10
    write_lines(samples, lines)
    refused(
        path, capsys,
        f"{samples} (dcpmi_cb, beside {path}): doc_id 10 is beyond the task's 10 documents "
        f"(0-9). {MOVE_AWAY}",
    )  # fmt: skip


def test_samples_chosen_with_samples_option_need_not_be_the_first(tmp_path):
    # `--samples '{"dcpmi_cb": [...]}'`: any 10 of the task's 56 documents, no --limit
    path = limited_run(tmp_path, n_total=56, limit=None)
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    for line, doc_id in zip(lines, [0, 5, 7, 11, 20, 21, 30, 40, 50, 55], strict=True):
        line["doc_id"] = doc_id
    write_lines(samples, lines)
    (run,) = load_results([path])
    assert run.has_samples


def test_nan_accuracies_match(tmp_path):
    # acc_avg without a tokenizer: NaN per document, NaN in the results ("NaN" in JSON)
    nan = float("nan")
    values = {m: [1.0, 0.0, 1.0, 1.0] for m in METHODS} | {"acc_avg": [nan] * 4}
    data = results_dict({"dcpmi_cb": entry(0.75, 0.75, nan, 0.75, n=4, norm=0.75)})
    path = write_run(tmp_path / "gpt2", data, {"dcpmi_cb": metric_samples(values)})
    (run,) = load_results([path])
    assert run.has_samples
    values["acc_avg"] = [1.0, 0.0, 1.0, 1.0]  # numbers where the results say NaN
    path = write_run(tmp_path / "other", data, {"dcpmi_cb": metric_samples(values)})
    with pytest.raises(
        SamplesError,
        match=r"its per-document acc_avg averages 0\.75 \(3 of 4 documents right\), but the "
        r"results file reports nan;",
    ):
        load_results([path])


# ------------------------------------------------------------------ what the samples carry


def full_samples(premise: str, n: int = 4) -> list[dict]:
    """Samples as lm-eval logs them, with requests and hashes (2 options per document)."""
    lines = []
    for doc_id in range(n):
        doc = {"question": f"question {doc_id}"}
        pairs = [
            (f"Q: question {doc_id}\nA:", " yes"),
            (f"Q: question {doc_id}\nA:", " no"),
            (premise, " yes"),
            (premise, " no"),
        ]
        lines.append(
            {
                "doc_id": doc_id,
                "doc": doc,
                "target": "0",
                "arguments": {
                    f"gen_args_{i}": {"arg_0": context, "arg_1": option}
                    for i, (context, option) in enumerate(pairs)
                },
                "filtered_resps": [["-1.0", "False"]] * 4,
                "filter": "none",
                "doc_hash": sha(json.dumps(doc, indent=2, ensure_ascii=False)),  # lm-eval's
                "prompt_hash": sha(pairs[0][0]),
                "target_hash": sha("0"),
                **{m: 1.0 for m in METHODS},
            }
        )
    return lines


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def full_run(folder: Path, premise: str = "\nA:", samples: list[dict] | None = None) -> Path:
    lines = samples if samples is not None else full_samples(premise)
    data = results_dict({"dcpmi_cb": entry(1.0, 1.0, 1.0, 1.0, n=4, norm=1.0)})
    data["configs"] = {"dcpmi_cb": {"metadata": {"version": 1.0, "domain_premise": premise}}}
    data["versions"] = {"dcpmi_cb": premise_version(1.0, premise)}
    joined = "".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in lines)
    data["task_hashes"] = {"dcpmi_cb": sha(joined)}
    return write_run(folder, data, {"dcpmi_cb": lines})


def test_full_samples_of_the_run_load(tmp_path):
    (run,) = load_results([full_run(tmp_path / "gpt2")])
    assert run.has_samples


def test_samples_with_other_prompts_are_refused(tmp_path, capsys):
    path = full_run(tmp_path / "gpt2")
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    lines[2]["prompt_hash"] = sha("Question: question 2\nAnswer:")  # another template's run
    write_lines(samples, lines)
    with pytest.raises(SamplesError) as caught:
        load_results([path])
    assert str(caught.value).startswith(
        f"{samples} (dcpmi_cb, beside {path}): its documents and prompts (lm-eval's doc_hash, "
        "prompt_hash and target_hash) hash to "
    )
    assert str(caught.value).endswith(f"the samples are another run's. {MOVE_AWAY}")


@pytest.mark.parametrize(
    ("change", "digest", "what"),
    [
        ({"doc": {"question": "question 7"}}, "doc_hash", "document"),
        ({"arguments": {"gen_args_0": {"arg_0": "Q: other\nA:", "arg_1": " yes"}}}, "prompt_hash",
         "first request's context"),
    ],
)  # fmt: skip
def test_a_line_whose_digests_are_not_its_own_is_refused(tmp_path, capsys, change, digest, what):
    # Results without task_hashes (nothing to compare the task's hash with): line 2 holds
    # another document, or other requests, than its lm-eval digests name.
    lines = full_samples("\nA:")
    lines[2] = {**lines[2], **change}
    path = full_run(tmp_path / "gpt2", samples=lines)
    data = json.loads(path.read_text())
    del data["task_hashes"]
    path.write_text(json.dumps(data))
    samples = samples_path(path, "dcpmi_cb")
    refused(
        path, capsys,
        f"{samples} (dcpmi_cb, beside {path}): doc 2's {digest} is not the digest of the "
        f"{what} the line logs; the line is another run's (or edited). {MOVE_AWAY}",
    )  # fmt: skip


def test_samples_with_another_domain_premise_are_refused(tmp_path, capsys):
    # the samples of a run with the premise "\nAnswer:", beside results of "\nA:" (lm-eval's
    # task_hashes see the conditional requests only: they match)
    path = full_run(tmp_path / "gpt2", "\nA:", full_samples("\nAnswer:"))
    samples = samples_path(path, "dcpmi_cb")
    refused(
        path, capsys,
        f"{samples} (dcpmi_cb, beside {path}): doc 0's domain requests do not hold the domain "
        f"premise '\\nA:' the results file records for the task (version "
        f"{premise_version(1.0, chr(10) + 'A:')}); the samples are another version's. "
        f"{MOVE_AWAY}",
    )  # fmt: skip


def test_template_premise_is_not_compared(tmp_path):
    template = "{{ question.split()[0] }}:"
    lines = full_samples("question:")
    (run,) = load_results([full_run(tmp_path / "gpt2", template, lines)])
    assert run.has_samples


# ------------------------------------------------------------------ --out: a failing rename


def test_out_is_restored_when_moving_a_file_into_place_fails(tmp_path, capsys, monkeypatch):
    path = ten_document_run(tmp_path / "runs")
    out = tmp_path / "out"
    out.mkdir()
    old = {name: f"the previous {name}\n" for name in ("report.md", "report.csv", "intervals.csv")}
    for name, text in old.items():
        (out / name).write_text(text)
    (out / "notes.txt").write_text("the user's\n")
    real_replace = os.replace
    moved = []

    def replace(source, target):
        if Path(target) == out / "intervals.csv" and Path(source).name.endswith(".tmp"):
            raise PermissionError(1, "Operation not permitted", str(target))
        real_replace(source, target)
        moved.append(Path(target).name)

    monkeypatch.setattr(os, "replace", replace)
    assert report_command([str(path)], str(out), ["md", "csv"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"dcpmi report: error: {out / 'intervals.csv'}: cannot be moved into place "
        "(Operation not permitted); nothing was written (the files already replaced were "
        "restored)\n"
    )
    assert {"report.md", "report.csv"} <= set(moved)  # they had been replaced
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        **old,
        "notes.txt": "the user's\n",
    }  # as before, and no temporary or backup file left


def test_new_files_are_removed_when_moving_a_file_into_place_fails(tmp_path, monkeypatch):
    path = ten_document_run(tmp_path / "runs")
    out = tmp_path / "out"
    out.mkdir()
    (out / "intervals.csv").write_text("the previous intervals\n")
    real_replace = os.replace

    def replace(source, target):
        if Path(target) == out / "intervals.csv" and Path(source).name.endswith(".tmp"):
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    assert report_command([str(path)], str(out), ["md", "csv"]) == 2
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "intervals.csv": "the previous intervals\n"
    }


def test_a_doc_id_that_is_no_number_is_refused(tmp_path, capsys):
    path = ten_document_run(tmp_path)
    samples = samples_path(path, "dcpmi_cb")
    lines = read_lines(samples)
    lines[2]["doc_id"] = "two"
    write_lines(samples, lines)
    refused(
        path, capsys, f"{samples} (dcpmi_cb, beside {path}): doc_id 'two' is not a document index"
    )
