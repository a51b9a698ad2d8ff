"""``benchmarks/bench_suite.py --summary``: the suite's time from per-task records, on
made-up records (hand-computed totals), one machine's only, with the samples where
``hf-prefix`` and ``hf`` disagree listed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from lm_eval_dcpmi import _paper as paper

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_suite  # noqa: E402

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

XEON = {"cpu": "Intel(R) Xeon(R) Processor", "isa": ["avx2", "avx512f", "amx_tile"]}


def record(task: str, wall: float, part=None, machine=XEON, diff=1e-5, same=True) -> dict:
    return {
        "task": task, "documents": 10, "part": part, "max_abs_loglik_diff": diff,
        "predictions_equal": same,
        "machine": {**machine, "date": "2026-12-03T12:00"},
        "full_split": {
            "wall_s": wall, "seconds_at_peak": wall / 2, "hf_projected_s": 3 * wall,
            "tree_tokens": 100, "forwarded_positions": 110, "useful_gflop": 21.0,
            "scored_positions": 50, "load_average_before": [1.0], "load_average_after": [2.0],
        },
    }  # fmt: skip


def write(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(exist_ok=True)
    for r in records:
        part = tuple(r["part"]) if r["part"] else None
        (folder / bench_suite.record_name(r["task"], part)).write_text(json.dumps(r))
    return folder


def whole_suite(**changes) -> list[dict]:
    """Every task but HellaSwag in one record of 100 s; HellaSwag in two of 300 s."""
    tasks = [t for t in paper.paper_order() if t != "dcpmi_hellaswag"]
    return [record(t, 100.0) for t in tasks] + [
        record("dcpmi_hellaswag", 300.0, part=[k, 2], **changes) for k in (1, 2)
    ]


def test_the_suite_is_the_sum_of_one_machines_records(tmp_path):
    joined = bench_suite.summary(write(tmp_path / "records", whole_suite()))
    # 15 x 100 s + 2 x 300 s = 2,100 s; every record at half its wall at the peak.
    assert joined["suite"] == {
        "wall_s": 2100.0, "wall_h": 0.58, "efficiency": 0.5, "hf_projected_h": 1.75,
    }  # fmt: skip
    hellaswag = next(r for r in joined["tasks"] if r["task"] == "dcpmi_hellaswag")
    assert (hellaswag["parts"], hellaswag["documents"], hellaswag["wall_s"]) == (2, 20, 600.0)
    assert joined["missing"] == [] and joined["samples_past_tolerance"] == []
    assert "Suite: **0.58 h** measured, efficiency 50%" in bench_suite.summary_markdown(joined)


def test_a_missing_part_gives_no_suite_time(tmp_path):
    records = whole_suite()[:-1]  # HellaSwag's second part not recorded
    joined = bench_suite.summary(write(tmp_path / "records", records))
    assert "suite" not in joined and joined["missing"] == ["dcpmi_hellaswag"]
    assert "Not yet a suite time: 1 tasks" in bench_suite.summary_markdown(joined)


def test_records_of_two_cpus_are_refused_naming_each(tmp_path):
    epyc = {"cpu": "AMD EPYC", "isa": ["avx2", "avx512f"]}
    records = whole_suite()
    records[0] = record("dcpmi_copa", 40.0, machine=epyc)
    with pytest.raises(SystemExit, match=r"records of 2 CPUs: .*AMD EPYC .*: dcpmi_copa\.json"):
        bench_suite.summary(write(tmp_path / "records", records))


def test_one_cpu_name_with_other_vector_extensions_is_another_machine(tmp_path):
    records = whole_suite()
    records[1] = record("dcpmi_storycloze", 100.0, machine={**XEON, "isa": ["avx2"]})
    with pytest.raises(SystemExit, match=r"dcpmi_storycloze\.json"):
        bench_suite.summary(write(tmp_path / "records", records))


def test_a_record_without_extensions_joins_its_cpu_by_name(tmp_path):
    records = whole_suite()
    records[2] = record("dcpmi_race_m", 100.0, machine={"cpu": XEON["cpu"]})  # older record
    assert bench_suite.summary(write(tmp_path / "records", records))["suite"]["wall_s"] == 2100


def test_samples_past_the_tolerance_are_listed(tmp_path):
    records = whole_suite(diff=1.02e-4)
    records[0] = record("dcpmi_copa", 100.0, same=False)
    joined = bench_suite.summary(write(tmp_path / "records", records))
    assert joined["samples_past_tolerance"] == [
        "dcpmi_copa.json: 1.00e-05, predictions differ",
        "dcpmi_hellaswag.part-1-of-2.json: 1.02e-04",
        "dcpmi_hellaswag.part-2-of-2.json: 1.02e-04",
    ]
    assert bench_suite.within_tolerance({"max_abs_loglik_diff": 1e-4, "predictions_equal": True})
