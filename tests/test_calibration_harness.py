"""Contextual and batch calibration in the real harness (lm-eval's Python API) on the embedded
model: the content-free requests cost a task a few requests, not a few per document, and
every logged metric equals an independent recompute from the logged loglikelihoods."""

from __future__ import annotations

import math

import pytest
from helpers import evaluate, load_task
from recompute import expected_bc, expected_cc

from lm_eval_dcpmi.rules import _scoring as scoring
from lm_eval_dcpmi.rules._layout import Layout

# Every test here reads the evaluation data (skipped without it).
pytestmark = pytest.mark.usefixtures("data_dir")

FREE = ("N/A", "", "[MASK]")
SST2 = Layout(("domain",), FREE)


def lls(sample: dict) -> list[float]:
    return [float(r[0]) for r in sample["filtered_resps"]]


def pairs(sample: dict) -> list[tuple[str, str]]:
    return [tuple(arguments[:2]) for arguments in sample["arguments"]]


def recompute_task(samples: list[dict]) -> tuple[dict[int, float], dict[int, float]]:
    """acc_cc and acc_bc of every document, from the samples alone (tests/recompute.py)."""
    samples = sorted(samples, key=lambda s: s["doc_id"])
    carriers = [s for s in samples if len(s["arguments"]) == 5 * 2]
    assert len(carriers) == 1, "one document carries the content-free requests"
    free = SST2.blocks(lls(carriers[0]), 2, carrier=True).content_free
    cc, documents = {}, []
    for sample in samples:
        conditional = lls(sample)[:2]
        gold = sample["doc"]["gold"]
        cc[sample["doc_id"]] = expected_cc(conditional, free, gold)
        documents.append((conditional, gold))
    bc = dict(zip([s["doc_id"] for s in samples], expected_bc(documents), strict=True))
    return cc, bc


def test_cc_and_bc_equal_an_independent_recompute_from_the_samples(hf_lm):
    results = evaluate(hf_lm, ["dcpmi_sst2"], limit=12)
    samples = results["samples"]["dcpmi_sst2"]
    assert len(samples) == 12
    by_id = {s["doc_id"]: s for s in samples}
    # document 0 carries the content-free requests: the task's own prompt around each input
    carrier = pairs(by_id[0])
    assert [context for context, _ in carrier[4:]] == [
        '"N/A" has a tone that is', '"N/A" has a tone that is',
        '"" has a tone that is', '"" has a tone that is',
        '"[MASK]" has a tone that is', '"[MASK]" has a tone that is',
    ]  # fmt: skip
    assert [option for _, option in carrier[4:]] == [" negative\n", " positive\n"] * 3
    assert all(len(s["arguments"]) == 4 for s in samples if s["doc_id"] != 0)
    cc, bc = recompute_task(samples)
    for sample in samples:
        assert sample["acc_cc"] == cc[sample["doc_id"]], sample["doc_id"]
        # each document logs its renormalised option probabilities and its gold index
        item = scoring.batch_item(lls(sample)[:2], sample["doc"]["gold"])
        assert sample["acc_bc"] == pytest.approx(item)
    row = results["results"]["dcpmi_sst2"]
    assert row["acc_cc,none"] == pytest.approx(sum(cc.values()) / 12)
    assert row["acc_bc,none"] == pytest.approx(sum(bc.values()) / 12)
    assert results["configs"]["dcpmi_sst2"]["metadata"]["content_free_fields"] == ["sentence"]


def test_bc_depends_on_the_documents_evaluated_and_samples_pick_the_carrier(hf_lm):
    picked = [3, 5, 8, 9]
    results = evaluate(hf_lm, ["dcpmi_sst2"], samples={"dcpmi_sst2": picked})
    samples = results["samples"]["dcpmi_sst2"]
    assert sorted(s["doc_id"] for s in samples) == picked
    # the first document built carries the content-free requests
    assert [s["doc_id"] for s in samples if len(s["arguments"]) == 10] == [3]
    cc, bc = recompute_task(samples)
    row = results["results"]["dcpmi_sst2"]
    assert row["acc_cc,none"] == pytest.approx(sum(cc.values()) / 4)
    assert row["acc_bc,none"] == pytest.approx(sum(bc.values()) / 4)


def test_a_task_without_a_fixed_label_set_reports_neither(hf_lm):
    results = evaluate(hf_lm, ["dcpmi_copa"], limit=2)
    row = results["results"]["dcpmi_copa"]
    assert not {"acc_cc,none", "acc_bc,none"} & set(row)
    assert all(len(s["arguments"]) == 4 for s in results["samples"]["dcpmi_copa"])


def test_cached_requests_and_predict_only_keep_the_content_free_requests(
    hf_lm, tmp_path, monkeypatch
):
    import lm_eval.caching.cache as cache

    monkeypatch.setattr(cache, "PATH", str(tmp_path))
    first = evaluate(hf_lm, ["dcpmi_sst2"], limit=4, cache_requests=True)
    second = evaluate(hf_lm, ["dcpmi_sst2"], limit=4, cache_requests=True)
    for metric in ("acc_cc", "acc_bc", "acc_dcpmi"):
        key = f"{metric},none"
        assert second["results"]["dcpmi_sst2"][key] == first["results"]["dcpmi_sst2"][key]
    bypass = evaluate(hf_lm, ["dcpmi_sst2"], limit=4, predict_only=True)
    assert not any(k.startswith(("acc_cc", "acc_bc")) for k in bypass["results"]["dcpmi_sst2"])
    counts = sorted(len(s["arguments"]) for s in bypass["samples"]["dcpmi_sst2"])
    assert counts == [4, 4, 4, 10]


def test_the_content_free_requests_cost_a_task_six_requests(task_manager):
    task = load_task(task_manager, "dcpmi_agn")
    task.build_all_requests(limit=20, rank=0, world_size=1)
    # 20 documents x 4 options x 2 (premise, domain premise) + 4 options x 3 inputs, once
    assert len(task.instances) == 20 * 4 * 2 + 12
    free = [i.arguments[0] for i in task.instances if i.doc_id == 0][8:]
    assert free[0] == " title: N/A\n summary: N/A\n topic:"
    assert free[4] == " title: \n summary: \n topic:"
    assert math.isclose(len(free), 12)
