"""A split scored in parts (scripts/score_parts.py) joins into one results file of the whole
split (make_results.py --join): hand-made parts, hand-computed values. No model, no data."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path

import pytest

from lm_eval_dcpmi import report
from lm_eval_dcpmi.report import joining, pages
from lm_eval_dcpmi.report.results import ReportError

pytestmark = pytest.mark.fast

TASK = "dcpmi_quiz"
# Five documents in two parts: 0-2 and 3-4.
DCPMI = [1.0, 0.0, 1.0, 1.0, 1.0]
LM = [0.0, 0.0, 1.0, 0.0, 1.0]
TRUNCATED = [0.0, 1.0, 0.0, 0.0, 2.0]
OTHERS = {"acc_unc": [0.0, 1.0, 0.0, 0.0, 0.0], "acc_avg": [1.0, 1.0, 0.0, 0.0, 0.0]}
VALUES = {"acc_dcpmi": DCPMI, "acc": LM, "truncated": TRUNCATED, **OTHERS}


def part_results(first: int, last: int, index: int, **changes) -> dict:
    n = last - first + 1
    row = {"name": TASK, "alias": TASK, "sample_len": n}
    for metric, values in VALUES.items():
        part = values[first : last + 1]
        row[f"{metric},none"] = sum(part) / n if metric != "truncated" else sum(part)
        row[f"{metric}_stderr,none"] = 0.1 if metric != "truncated" else "N/A"
    data = {
        "results": {TASK: row},
        "configs": {TASK: {"task": TASK, "metadata": {"premise_sha256": "ab" * 32}}},
        "versions": {TASK: "1.0+premise.abababab"},
        "n-shot": {TASK: 0},
        "n-samples": {TASK: {"original": 5, "effective": n}},
        "config": {"model": "hf-prefix", "model_args": {"pretrained": "org/model"}},
        "model_name": "org/model",
        "task_hashes": {TASK: f"hash{index}"},
        "date": 1000.0 + index,
        "total_evaluation_time_seconds": "10.0",
        "dcpmi_part": {
            "task": TASK,
            "index": index,
            "parts": 2,
            "first": first,
            "last": last,
            "documents": 5,
            "wall_seconds": 60.0 + index,
        },
    }
    for key, value in changes.items():
        data[key] = value
    return data


def write_part(folder: Path, data: dict, stamp: str, ids: range | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{stamp}.json"
    path.write_text(json.dumps(data))
    part = data["dcpmi_part"]
    with gzip.open(folder / f"samples_{TASK}_{stamp}.jsonl.gz", "wt") as file:
        for i in ids if ids is not None else range(part["first"], part["last"] + 1):
            sample = {"doc_id": i, "filter": "none", "target": "0"}
            sample |= {metric: values[i] for metric, values in VALUES.items()}
            file.write(json.dumps(sample) + "\n")
    return path


def two_parts(folder: Path, **changes) -> list[Path]:
    return [
        write_part(folder, part_results(0, 2, 0), "2026-01-01T00-00-00"),
        write_part(folder, part_results(3, 4, 1, **changes), "2026-01-02T00-00-00"),
    ]


def test_parts_join_into_the_whole_split_with_lm_evals_aggregations(tmp_path):
    joined, samples = joining.join_parts(two_parts(tmp_path))
    row = joined["results"][TASK]
    assert [s["doc_id"] for s in samples] == [0, 1, 2, 3, 4]
    assert row["acc_dcpmi,none"] == pytest.approx(0.8)
    # sample std of (1,0,1,1,1): sqrt(0.8 / 4) = sqrt(0.2); over sqrt(5)
    assert row["acc_dcpmi_stderr,none"] == pytest.approx(math.sqrt(0.2) / math.sqrt(5))
    assert row["acc,none"] == pytest.approx(0.4)
    assert row["acc_stderr,none"] == pytest.approx(math.sqrt(0.3) / math.sqrt(5))
    assert row["acc_unc,none"] == pytest.approx(0.2)
    assert row["truncated,none"] == 3.0 and row["truncated_stderr,none"] == "N/A"
    assert row["sample_len"] == 5
    assert joined["n-samples"] == {TASK: {"original": 5, "effective": 5}}
    assert joined["dcpmi_task_seconds"] == {TASK: 121.0}
    assert [p["task_hash"] for p in joined["dcpmi_parts"]] == ["hash0", "hash1"]
    assert [(p["first"], p["last"]) for p in joined["dcpmi_parts"]] == [(0, 2), (3, 4)]
    assert "task_hashes" not in joined and "dcpmi_part" not in joined


def test_the_joined_file_reads_as_a_full_run(tmp_path):
    out = pages.join_run(tmp_path / "parts", "whole", root=tmp_path)
    assert [p.name for p in out] == [
        "results_2026-01-02T00-00-00.json",
        f"samples_{TASK}_2026-01-02T00-00-00.jsonl.gz",
    ]
    (run,) = report.load_results([out[0]])
    (row,) = run.tasks
    assert (row.n, row.n_total) == (5, 5)
    assert row.scores["acc_dcpmi"] == pytest.approx(0.8)
    assert row.per_doc is not None


@pytest.fixture(autouse=True)
def _parts(tmp_path):
    two_parts(tmp_path / "parts")


def test_a_missing_part_is_named(tmp_path):
    folder = tmp_path / "one"
    paths = [write_part(folder, part_results(0, 2, 0), "2026-01-01T00-00-00")]
    with pytest.raises(ReportError, match=r"cover 3 of its 5 documents \(missing 3 to 4: 2\)"):
        joining.join_parts(paths)


def test_parts_of_another_model_do_not_join(tmp_path):
    config = {"model": "hf-prefix", "model_args": {"pretrained": "org/other"}}
    with pytest.raises(ReportError, match="/config/model_args/pretrained differs"):
        joining.join_parts(two_parts(tmp_path / "x", config=config))


def test_a_part_whose_samples_miss_a_document_is_named(tmp_path):
    folder = tmp_path / "x"
    write_part(folder, part_results(0, 2, 0), "2026-01-01T00-00-00")
    broken = write_part(folder, part_results(3, 4, 1), "2026-01-02T00-00-00", ids=range(3, 4))
    with pytest.raises(ReportError, match=r"samples_dcpmi_quiz_2026-01-02.*documents 3 to 4"):
        joining.join_parts(sorted(folder.glob("results_*.json")))
    assert broken.is_file()


def test_a_corpus_level_metric_is_refused(tmp_path):
    parts = two_parts(tmp_path / "x")
    for path in parts:
        data = json.loads(path.read_text())
        data["results"][TASK]["acc_bc,none"] = 0.5
        path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match="acc_bc is corpus-level"):
        joining.join_parts(parts)


def test_a_results_file_that_is_no_part_is_named(tmp_path):
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    data = copy.deepcopy(part_results(0, 2, 0))
    del data["dcpmi_part"]
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match="not a part of a split"):
        joining.join_parts([path])
