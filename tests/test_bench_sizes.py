"""``benchmarks/bench_sizes.py``: the comparisons and the page on made-up runs
(hand-computed). The GPU check itself (``benchmarks/device_check.sh --tiny``) runs in the
CPU twin of the GPU machine's image: tests/test_device_twin.py."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import published_configs  # noqa: E402
import sizes  # noqa: E402

# Two documents of 2 options: conditional, then domain requests.
REQUESTS = {
    "source": "made-up",
    "counts": {"t": 2},
    "documents": [
        {"task": "t", "doc_id": d, "first": 4 * d, "count": 4, "options": 2, "carrier": False,
         "references": ["domain"], "content_free": [], "n_chars": [3, 9]}
        for d in range(2)
    ],
}  # fmt: skip


def run(lls: list[float]) -> dict:
    return {"loglikelihoods": lls, "greedy": [False] * 8, "n_tokens": [1, 3] * 4}


@pytest.mark.fast
def test_compare_finds_the_largest_difference_and_the_documents_whose_picks_differ():
    a = run([-4.0, -5.0, -1.0, -4.5, -2.0, -3.0, -1.0, -1.0])
    b = run([-4.0, -5.0, -1.0, -4.5, -2.0, -3.0, -1.0, -0.5])
    same = sizes.compare(REQUESTS, a, a)
    assert same == {"max_abs_diff": 0.0, "picks_equal": True, "documents_differing": [],
                    "greedy_equal": True}  # fmt: skip
    # Document 1: DC-PMI scores -1 and -2 under a, -1 and -2.5 under b; Unc picks 0 under a
    # (a tie of -1.0 and -1.0, the lowest index wins) and 1 under b.
    differs = sizes.compare(REQUESTS, a, b)
    assert differs["max_abs_diff"] == 0.5 and differs["documents_differing"] == ["t 1: acc_unc"]


@pytest.mark.fast
def test_performed_flops_count_the_head_where_each_backend_runs_it():
    spec = published_configs.CONFIGS["tiny-llama"]
    parameters = {"total": 10, "non_embedding": 1000, "head": 500}
    record = {"forwarded_positions": 40, "scored_positions": 6}
    # layers: 2 x 1000 x 40; head: hf at all 40 positions, hf-prefix at the 6 scored
    assert sizes.performed_gflop(spec, parameters, record, "hf") == (80_000 + 40_000) / 1e9
    assert sizes.performed_gflop(spec, parameters, record, "hf-prefix") == (80_000 + 6_000) / 1e9


@pytest.mark.fast
def test_every_configuration_is_a_real_size_its_tokenizer_fits():
    """The published configurations span 0.5B to 8B parameters in four families, and
    each vocabulary holds the embedded tokenizer's ids (49,152)."""
    real = {n: s for n, s in published_configs.CONFIGS.items() if n != "tiny-llama"}
    assert {s.model_type for s in real.values()} >= {"llama", "qwen2", "gemma3_text", "olmo2"}
    assert all(s.config["vocab_size"] >= 49152 for s in published_configs.CONFIGS.values())
    assert any(s.dtype == "bfloat16" and s.config["hidden_size"] == 4096 for s in real.values())


@pytest.mark.fast
def test_the_performance_page_shows_the_committed_record_by_parameter_count():
    (record,) = sorted((ROOT / "results" / "benchmarks").glob("sizes_*.json"))[-1:]
    table = sizes.docs_table(json.loads(record.read_text()))
    page = (ROOT / "docs" / "performance.md").read_text().splitlines()
    start = page.index(table[0])
    assert page[start : start + len(table)] == table
    assert page[start + len(table)] == ""  # no row the record lacks
    assert record.name in "\n".join(page[start - 12 : start])  # the record is named above it
