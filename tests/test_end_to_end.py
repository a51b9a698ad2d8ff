"""The real `lm_eval` CLI on the embedded model: every logged document's metrics (the
accuracies, and PMA) are recomputed here from its logged loglikelihoods and token counts."""

from __future__ import annotations

import math
import statistics

import pytest
import transformers
from helpers import GGUF_FILE, embedded_model_dir
from recompute import expected_bc, expected_cc, expected_metrics, expected_pma

from lm_eval_dcpmi.report._samples import task_layout
from lm_eval_dcpmi.rules._scoring import ACCURACIES as METRICS
from lm_eval_dcpmi.rules._scoring import MEASURES


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.AutoTokenizer.from_pretrained(embedded_model_dir(), gguf_file=GGUF_FILE)


def continuation_tokens(tokenizer, context: str, continuation: str) -> int:
    # lm-eval's split: trailing context whitespace joins the continuation, then
    # continuation tokens = tokens(context + continuation) - tokens(context).
    stripped = context.rstrip()
    continuation = context[len(stripped) :] + continuation
    return len(tokenizer.encode(stripped + continuation)) - len(tokenizer.encode(stripped))


def dcpmi_tasks(run) -> list[str]:
    return sorted(t for t in run.results["configs"] if t.startswith("dcpmi_"))


def test_every_document_is_recomputed_from_its_logged_loglikelihoods(lm_eval_run, tokenizer):
    tasks = dcpmi_tasks(lm_eval_run)
    assert tasks, "no dcpmi task in the run"
    checked = 0
    for task in tasks:
        samples = lm_eval_run.samples(task)
        assert len(samples) == min(3, lm_eval_run.results["n-samples"][task]["original"])
        layout = task_layout(lm_eval_run.results["configs"][task])
        blocks = {}
        for sample in samples:
            pairs = [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]
            n, carrier = layout.n_options([c for _, c in pairs])
            request_blocks = layout.blocks(pairs, n, carrier)
            blocks[sample["doc_id"]] = layout.blocks(
                [float(r[0][0]) for r in sample["resps"]], n, carrier
            )
            conditional_pairs, domain_pairs = request_blocks.conditional, request_blocks.domain
            conditional, domain = (
                blocks[sample["doc_id"]].conditional,
                blocks[sample["doc_id"]].domain,
            )
            # the domain requests score the same continuations after one shared premise
            assert [c for _, c in conditional_pairs] == [c for _, c in domain_pairs]
            assert len({ctx for ctx, _ in domain_pairs}) == 1
            n_tokens = [continuation_tokens(tokenizer, *p) for p in conditional_pairs]
            n_chars = [len(c) for _, c in conditional_pairs]  # target_delimiter is ""
            expected = expected_metrics(
                conditional, domain, sample["doc"]["gold"], n_tokens, n_chars
            )
            assert set(METRICS) < set(expected)
            assert {m: sample[m] for m in expected} == expected, (task, sample["doc_id"])
            # PMA: the options' probability mass after the premise, and after the domain one
            assert math.isclose(sample["pma"], expected_pma(conditional), rel_tol=1e-12)
            assert math.isclose(sample["pma_domain"], expected_pma(domain), rel_tol=1e-12)
            assert 0 < sample["pma"] <= len(conditional)
            assert sample["truncated"] == 0.0  # 8192-token window: nothing is cut
            assert sample["unranked"] == 0.0
            checked += 1
        if layout.content_free:  # CC and BC, on the paper's classification tasks
            (free,) = [b.content_free for b in blocks.values() if b.content_free is not None]
            documents = [(blocks[s["doc_id"]].conditional, s["doc"]["gold"]) for s in samples]
            for sample in samples:
                gold = sample["doc"]["gold"]
                expected_value = expected_cc(blocks[sample["doc_id"]].conditional, free, gold)
                assert sample["acc_cc"] == expected_value, (task, sample["doc_id"])
            mean = sum(expected_bc(documents)) / len(documents)
            assert math.isclose(lm_eval_run.results["results"][task]["acc_bc,none"], mean)
        # the reported accuracy is the mean over the logged documents
        for metric in METRICS + MEASURES + (("acc_cc",) if layout.content_free else ()):
            mean = sum(s[metric] for s in samples) / len(samples)
            assert math.isclose(lm_eval_run.results["results"][task][f"{metric},none"], mean)
        # a measure's standard error is lm-eval's mean_stderr: sample std / sqrt(n)
        for metric in MEASURES:
            values = [s[metric] for s in samples]
            reported = lm_eval_run.results["results"][task][f"{metric}_stderr,none"]
            expected = statistics.stdev(values) / math.sqrt(len(values))
            assert math.isclose(reported, expected, abs_tol=1e-15)  # equal masses: 0 or so
            assert lm_eval_run.results["higher_is_better"][task][metric] is None
    assert checked >= len(tasks) * 2


def test_results_table_shows_every_accuracy(lm_eval_run):
    for task in dcpmi_tasks(lm_eval_run):
        row = lm_eval_run.results["results"][task]
        assert {f"{m},none" for m in METRICS} <= set(row)
        assert row["truncated,none"] == 0.0
    rows = [line.replace(" ", "").split("|") for line in lm_eval_run.stdout.splitlines()]
    shown = {cells[5] for cells in rows if len(cells) > 6}  # lm-eval's Metric column
    assert set(METRICS) | set(MEASURES) | {"truncated", "unranked"} <= shown
    # a measure has no better direction: lm-eval's table shows no arrow beside it
    directions = {cells[5]: cells[6] for cells in rows if len(cells) > 8}
    assert directions["pma"] == directions["pma_domain"] == ""
    assert directions["acc_dcpmi"] == "↑"
