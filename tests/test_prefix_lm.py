"""``hf-prefix`` (PrefixHFLM) scores every request exactly as ``hf`` does.

The embedded model is loaded once (the ``hf_lm`` fixture); ``PrefixHFLM`` wraps the
same weights, so the two backends differ only in how they drive the model. Scores
are compared within 1e-4: ``hf`` itself moves by up to ~3e-5 between batch sizes.
"""

from __future__ import annotations

import math

import pytest
from helpers import (
    TOLERANCE,
    ForwardTokens,
    assert_same,
    generic_pairs,
    instances,
    load_task,
    plain_lm,
    request_pairs,
)

# Real documents per task: (task, documents). RACE-H: the shortest premises among the
# first 40 questions (a RACE premise is a whole article; hf forwards it 8 times).
TASK_DOCS = [("dcpmi_copa", 4), ("dcpmi_sst5", 2), ("dcpmi_boolq", 3), ("dcpmi_race_h", 1)]


def _prefix_lm(hf_lm, **kwargs):
    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    kwargs.setdefault("batch_size", 8)
    return PrefixHFLM(pretrained=hf_lm.model, tokenizer=hf_lm.tokenizer, device="cpu", **kwargs)


@pytest.fixture(scope="session")
def prefix_lm(hf_lm):
    """PrefixHFLM on the weights of ``hf_lm`` (no second load)."""
    lm = _prefix_lm(hf_lm)
    assert lm._setup is not None, "the self-check should accept SmolLM2 (a plain Llama)"
    assert lm._setup.packed and lm._setup.vocab == 49152
    return lm


def _task_pairs(task_manager, name: str, n_docs: int) -> list[tuple[str, str]]:
    try:
        task = load_task(task_manager, name)
    except (KeyError, ValueError) as err:  # a task another change has not added yet
        pytest.skip(f"{name} does not load: {err}")
    if name == "dcpmi_race_h":
        docs = request_pairs(task, 40)
        docs.sort(key=lambda pairs: len(pairs[0][0]))
        return [pair for doc in docs[:n_docs] for pair in doc]
    return [pair for doc in request_pairs(task, n_docs) for pair in doc]


@pytest.mark.fast
def test_registered_name_resolves_to_prefix_lm():
    from lm_eval.api.registry import get_model

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    assert get_model("hf-prefix") is PrefixHFLM


@pytest.mark.parametrize(("name", "n_docs"), TASK_DOCS)
def test_task_requests_score_as_hf(hf_lm, prefix_lm, task_manager, name, n_docs):
    pairs = _task_pairs(task_manager, name, n_docs)
    # Exercise duplicates too: the first request twice more, in different places.
    pairs = [pairs[0], *pairs, pairs[0]]
    with ForwardTokens(hf_lm.model) as hf_count:
        expected = hf_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    with ForwardTokens(prefix_lm.model) as prefix_count:
        got = prefix_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, got, [f"{name} {pair!r:.80}" for pair in pairs])
    assert got[0] == got[-1] == got[1]
    # The point of hf-prefix: a shared premise goes through the model once.
    assert prefix_count.tokens <= hf_count.tokens
    if name == "dcpmi_race_h":
        assert 3 * prefix_count.tokens < hf_count.tokens


def test_generic_requests_and_batch_sizes(hf_lm, prefix_lm):
    pairs = generic_pairs()
    expected = hf_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, prefix_lm.loglikelihood(instances(pairs), disable_tqdm=True), pairs)
    for batch_size in (1, "auto"):  # "auto": HFLM's probe, here from at most 4 rows
        lm = _prefix_lm(hf_lm, batch_size=batch_size, max_batch_size=4)
        got = lm.loglikelihood(instances(pairs), disable_tqdm=True)
        assert_same(expected, got, [f"batch_size={batch_size} {p!r}" for p in pairs])


def test_greedy_continuations(hf_lm, prefix_lm):
    """is_greedy is True for the model's own greedy tokens, at any continuation length."""
    import torch

    context = hf_lm.tok_encode("Once upon a time, there was a")
    tokens = list(context)
    with torch.no_grad():
        for _ in range(4):
            tokens.append(int(hf_lm.model(torch.tensor([tokens])).logits[0, -1].argmax()))
    greedy = tokens[len(context) :]
    requests = [(("g", str(n)), context, greedy[:n]) for n in (1, 2, 4)]
    requests.append((("not", "greedy"), context, [*greedy[:2], (greedy[2] + 1) % 1000]))
    expected = hf_lm._loglikelihood_tokens(requests, disable_tqdm=True)
    got = prefix_lm._loglikelihood_tokens(requests, disable_tqdm=True)
    assert_same(expected, got, [r[0] for r in requests])
    assert [g for _, g in got] == [True, True, True, False]


def test_left_truncation_matches_hf(hf_lm, task_manager):
    """Requests longer than max_length are left-truncated as hf does (hf's own path)."""
    pairs = _task_pairs(task_manager, "dcpmi_race_h", 1) + _task_pairs(
        task_manager, "dcpmi_copa", 2
    )
    hf_short = plain_lm(hf_lm, batch_size=8, max_length=48)
    prefix_short = _prefix_lm(hf_lm, max_length=48)
    lengths = [sum(map(len, prefix_short._encode_pair(*p))) for p in pairs]
    assert any(n > 49 for n in lengths) and any(n <= 49 for n in lengths)
    expected = hf_short.loglikelihood(instances(pairs), disable_tqdm=True)
    got = prefix_short.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, got, pairs)


def test_cache_hook_sees_every_request(prefix_lm):
    pairs = generic_pairs()

    class Recorder:
        def __init__(self):
            self.calls = []

        def add_partial(self, attr, req, res):
            self.calls.append((attr, req, res))

    recorder, saved = Recorder(), prefix_lm.cache_hook
    prefix_lm.set_cache_hook(recorder)
    try:
        got = prefix_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    finally:
        prefix_lm.set_cache_hook(saved)
    assert sorted(recorder.calls) == sorted(
        ("loglikelihood", pair, answer) for pair, answer in zip(pairs, got, strict=True)
    )


def test_rolling_loglikelihood_is_hfs(hf_lm, prefix_lm):
    from lm_eval.api.instance import Instance

    text = "The quick brown fox jumps over the lazy dog. " * 3
    request = [Instance("loglikelihood_rolling", {}, (text,), 0)]
    expected = hf_lm.loglikelihood_rolling(request, disable_tqdm=True)
    assert prefix_lm.loglikelihood_rolling(request, disable_tqdm=True) == pytest.approx(
        expected, abs=TOLERANCE
    )


def test_falls_back_to_hf_when_cache_unusable(hf_lm, monkeypatch):
    from lm_eval_dcpmi.hf_prefix import _check as prefix_check
    from lm_eval_dcpmi.hf_prefix import _lm as prefix_lm

    for module in (prefix_check, prefix_lm):  # the probe's view and the passes'
        monkeypatch.setattr(module, "layer_tensors", lambda cache: None)
    lm = _prefix_lm(hf_lm)
    assert lm._setup is None
    pairs = generic_pairs()[:4]
    expected = hf_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    assert_same(expected, lm.loglikelihood(instances(pairs), disable_tqdm=True), pairs)


@pytest.mark.api
def test_simple_evaluate_metrics_equal_hf(hf_lm, prefix_lm, task_manager):
    """A real lm-eval run: every DC-PMI accuracy and count with hf-prefix is hf's."""
    from lm_eval import simple_evaluate

    from lm_eval_dcpmi.rules._scoring import ACCURACIES, COUNTS

    tasks = ["dcpmi_copa", "dcpmi_boolq"]
    available = [t for t in tasks if t in task_manager.all_tasks]
    assert "dcpmi_copa" in available

    def run(lm):
        out = simple_evaluate(
            model=lm,
            tasks=available,
            limit=4,
            task_manager=task_manager,
            bootstrap_iters=0,
            log_samples=False,
        )
        return out["results"]

    expected, got = run(hf_lm), run(prefix_lm)
    for task in available:
        for metric in (*ACCURACIES, *COUNTS):
            key = f"{metric},none"
            want, value = expected[task][key], got[task][key]
            assert (math.isnan(want) and math.isnan(value)) or want == value, (task, metric)


def test_a_small_cache_budget_costs_tokens_not_exactness(hf_lm, prefix_lm, task_manager):
    """Under a cache budget too small for a RACE article's cache, the article is forwarded
    in front of each question instead (collapsed nodes): more tokens, the same scores."""
    pairs = _task_pairs(task_manager, "dcpmi_race_h", 2)
    expected = hf_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    tight = _prefix_lm(hf_lm, prefix_cache_mb=1)  # ~1 MiB: under 100 tokens of cache
    counts = []
    for lm in (prefix_lm, tight):
        with ForwardTokens(lm.model) as count:
            got = lm.loglikelihood(instances(pairs), disable_tqdm=True)
        assert_same(expected, got, [f"{pair!r:.80}" for pair in pairs])
        counts.append(count.tokens)
    with ForwardTokens(hf_lm.model) as hf_count:
        hf_lm.loglikelihood(instances(pairs), disable_tqdm=True)
    assert counts[0] < counts[1] <= hf_count.tokens


def test_one_worker_and_two_score_alike(hf_lm, task_manager):
    """On the CPU hf-prefix scores independent subtrees in one thread per core (torch's
    thread count); one worker (a GPU's setting) gives the same answers."""
    import torch

    pairs = _task_pairs(task_manager, "dcpmi_copa", 3) + generic_pairs()
    assert _prefix_lm(hf_lm)._workers == torch.get_num_threads()
    one, two = (
        _prefix_lm(hf_lm, prefix_workers=n).loglikelihood(instances(pairs), disable_tqdm=True)
        for n in (1, 2)
    )
    assert_same(one, two, [f"{pair!r:.80}" for pair in pairs])


def test_a_failing_worker_stops_the_others(hf_lm, monkeypatch):
    """One worker's error ends the scoring at once: the other worker stops at its next
    pass instead of running its whole plan (leaving the pool waits for it), and the error
    is the one raised. SIGTERM and Ctrl-C in the main thread take the same way out."""
    import threading

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    lm = _prefix_lm(hf_lm, prefix_workers=2, batch_size=1)
    forward = PrefixHFLM._forward
    calls = []
    failed = threading.Event()

    def first_fails(self, *args, **kwargs):
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            failed.set()
            raise RuntimeError("the first pass broke")
        failed.wait(5)  # the other worker's passes come after the failure
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(PrefixHFLM, "_forward", first_fails)
    # Premises that share no first token: 20 subtrees of one pass each (batch size 1),
    # 10 per worker.
    words = "Apples Birds Cats Dogs Eggs Fish Goats Hats Ice Jam Kites Lamps Mice Nuts Owls"
    words += " Pigs Quilts Rats Socks Trees"
    pairs = [(f"{word} are here.", f" option {j}") for word in words.split() for j in "ab"]
    with pytest.raises(RuntimeError, match="the first pass broke"):
        lm.loglikelihood(instances(pairs), disable_tqdm=True)
    assert 1 <= len(calls) <= 3, calls  # without the stop: 1 + the other worker's ~10


def test_onednn_kernels_are_opt_in_close_and_leave_hf_alone(hf_lm, task_manager):
    """prefix_kernels=onednn: the linear layers on oneDNN's packed weights inside
    hf-prefix's passes only. Its rounding is another summation order's (within 3e-4 of
    hf here, same is_greedy); hf's own scoring of the same model object, before and after
    the patch, is bit for bit unchanged; the default is torch's kernels."""
    pairs = _task_pairs(task_manager, "dcpmi_copa", 2) + generic_pairs()
    before = plain_lm(hf_lm).loglikelihood(instances(pairs), disable_tqdm=True)
    assert _prefix_lm(hf_lm)._packed is False  # the default
    lm = _prefix_lm(hf_lm, prefix_kernels="onednn")
    assert lm._packed is True and lm._setup is not None and lm._setup.packed
    got = lm.loglikelihood(instances(pairs), disable_tqdm=True)
    after = plain_lm(hf_lm).loglikelihood(instances(pairs), disable_tqdm=True)
    assert after == before
    diffs = [abs(a[0] - b[0]) for a, b in zip(before, got, strict=True)]
    assert 0 < max(diffs) <= 3e-4, diffs  # rounded differently, not computed differently
    assert [g for _, g in got] == [g for _, g in before]


@pytest.mark.fast
def test_an_unknown_prefix_kernels_value_names_the_choices():
    import torch

    from lm_eval_dcpmi.hf_prefix._kernels import use_packed

    with pytest.raises(ValueError, match=r"prefix_kernels='mkl'.*torch, onednn"):
        use_packed(torch.nn.Linear(2, 2), torch.device("cpu"), "mkl", None)
    assert use_packed(torch.nn.Linear(2, 2), torch.device("cpu"), None, None) is False
    linear = torch.nn.Linear(2, 2)
    assert use_packed(linear, torch.device("cpu"), "onednn", torch.bfloat16) is False  # autocast
    assert not hasattr(linear, "_hf_prefix_packed_weight")
