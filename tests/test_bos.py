"""A tokenizer that adds a BOS token (Llama, Gemma, Mistral): every count follows lm-eval.

lm-eval's HF models put the BOS token in front of the context (``add_bos_token=True``),
so a request's context is one token longer and the continuation's split is taken after
it. Here the embedded tokenizer adds one (lm-eval's ``add_bos_token=True`` model
argument) on a tiny random-weight Llama, with a window of ``MAX_LENGTH`` tokens that cuts
RACE's articles: ``acc_avg``'s option tokens, ``truncated``, the domain requests, CC's
content-free requests and ``hf-prefix``'s prefix tree are checked against lm-eval's own
split of each request.
"""

from __future__ import annotations

import math

import pytest
from helpers import TOLERANCE, tiny_model
from recompute import expected_cc, expected_metrics

from lm_eval_dcpmi.report._samples import task_layout

MAX_LENGTH = 160  # COPA and SST-2 fit; a RACE-H article does not
TASKS = ["dcpmi_copa", "dcpmi_sst2", "dcpmi_race_h", "dcpmi_hellaswag", "dcpmi_arc_easy"]
EVALUATED = ["dcpmi_copa", "dcpmi_sst2", "dcpmi_race_h"]


@pytest.fixture(scope="module")
def bos(tmp_path_factory, data_dir):
    """(hf with a BOS-adding tokenizer, the model arguments, a TaskManager told them)."""
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    folder = str(tiny_model(tmp_path_factory.mktemp("bos"), "llama"))
    args = {"pretrained": folder, "add_bos_token": True, "max_length": MAX_LENGTH}
    hf = HFLM(**args, device="cpu", batch_size=8)
    manager = TaskManager(include_path=str(task_configs_dir()), metadata=args)
    return hf, args, manager


def split(lm, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's own split of a request (``TemplateLM.loglikelihood``)."""
    if not context:
        return [lm.prefix_token_id], lm.tok_encode(continuation, add_special_tokens=False)
    return lm._encode_pair(context, continuation)


def test_the_tokenizer_adds_bos(bos):
    hf, _, _ = bos
    bos_id = hf.tokenizer.bos_token_id
    assert bos_id is not None and hf.tok_encode("Hello world")[0] == bos_id
    assert hf.tokenizer.encode("Hello world", add_special_tokens=False)[0] != bos_id
    context, continuation = split(hf, "The cat sat", " on the mat")
    assert context[0] == bos_id and bos_id not in continuation


def test_every_requests_token_counts_are_lm_evals(bos):
    from lm_eval_dcpmi.task._tokens import counter_for_metadata

    hf, args, manager = bos
    counter = counter_for_metadata(args)
    assert counter is not None and counter.max_length == MAX_LENGTH
    loaded = manager.load_task_or_group(TASKS)
    seen = {"content-free": 0, "past the window": 0}
    for name in TASKS:
        task = loaded[name]
        task.build_all_requests(limit=3, rank=0, world_size=1)
        by_doc: dict[int, list] = {}
        for instance in task.instances:
            context, continuation = instance.arguments[:2]
            want = tuple(map(len, split(hf, context, continuation)))
            assert counter.split(context, continuation) == want, (name, instance.doc_id)
            seen["past the window"] += sum(want) > MAX_LENGTH + 1
            by_doc.setdefault(instance.doc_id, []).append(instance)
        layout = task.layout
        for doc_id, requests in by_doc.items():
            requests.sort(key=lambda i: i.idx)
            pairs = [tuple(i.arguments[:2]) for i in requests]
            n, carrier = layout.n_options([c for _, c in pairs])
            blocks = layout.blocks(pairs, n, carrier)
            options = [split(hf, *p)[1] for p in blocks.conditional]
            # The domain premise and every content-free input score the very same tokens.
            others = [blocks.domain, *(blocks.content_free or {}).values()]
            for block in others:
                assert [split(hf, *p)[1] for p in block] == options, (name, doc_id)
            seen["content-free"] += len(blocks.content_free or {})
    assert seen["content-free"] and seen["past the window"]


@pytest.mark.parametrize("backend", ["hf", "hf-prefix"])
def test_runs_recompute_with_lm_evals_split(bos, backend):
    """Both backends on COPA, SST-2 (CC, BC) and RACE-H, with BOS: each document's metrics
    recomputed from its logged loglikelihoods and lm-eval's token split; hf-prefix's
    loglikelihoods are hf's."""
    import lm_eval

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    hf, args, manager = bos
    model = hf
    if backend == "hf-prefix":
        model = PrefixHFLM(
            pretrained=hf.model, tokenizer=hf.tokenizer, device="cpu", batch_size=8,
            add_bos_token=True, max_length=MAX_LENGTH,
        )  # fmt: skip
        assert model._setup is not None
    out = lm_eval.simple_evaluate(
        model=model, tasks=EVALUATED, limit=3, task_manager=manager, log_samples=True
    )
    truncated = 0
    for name in EVALUATED:
        samples = out["samples"][name]
        layout = task_layout(out["configs"][name])
        free = None
        for sample in samples:
            pairs = [tuple(a[:2]) for a in sample["arguments"]]  # in memory: tuples
            n, carrier = layout.n_options([c for _, c in pairs])
            lls = layout.blocks([float(r[0][0]) for r in sample["resps"]], n, carrier)
            requests = layout.blocks(pairs, n, carrier)
            n_tokens = [len(split(hf, *p)[1]) for p in requests.conditional]
            n_chars = [len(c) for _, c in requests.conditional]
            gold = sample["doc"]["gold"]
            expected = expected_metrics(lls.conditional, lls.domain, gold, n_tokens, n_chars)
            assert {m: sample[m] for m in expected} == expected, (name, sample["doc_id"])
            over = sum(sum(map(len, split(hf, *p))) > MAX_LENGTH + 1 for p in pairs)
            assert sample["truncated"] == over, (name, sample["doc_id"])
            truncated += over
            if lls.content_free is not None:
                free = lls.content_free
            if backend == "hf-prefix":  # the same requests through hf, one by one
                from helpers import instances

                want = hf.loglikelihood(instances(pairs), disable_tqdm=True)
                got = [float(r[0][0]) for r in sample["resps"]]
                assert all(abs(w[0] - g) <= TOLERANCE for w, g in zip(want, got, strict=True))
        if layout.content_free:
            assert free is not None
            for sample in samples:
                pairs = [tuple(a[:2]) for a in sample["arguments"]]  # in memory: tuples
                n, carrier = layout.n_options([c for _, c in pairs])
                lls = layout.blocks([float(r[0][0]) for r in sample["resps"]], n, carrier)
                want_cc = expected_cc(lls.conditional, free, sample["doc"]["gold"])
                assert sample["acc_cc"] == want_cc, (name, sample["doc_id"])
        mean = math.fsum(s["acc_avg"] for s in samples) / len(samples)
        assert math.isclose(out["results"][name]["acc_avg,none"], mean)
    assert truncated > 0  # RACE's articles are cut, as hf cuts them
