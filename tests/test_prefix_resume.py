"""``--use_cache`` with hf-prefix: every answer is stored as it is computed, so an
interrupted run resumes where it stopped.

lm-eval's ``CachingLM`` (``lm_eval/api/model.py``) hands the LM a cache hook; the LM
calls ``cache_hook.add_partial`` for each answer. hf-prefix does so from its own path
(as each pass finishes) and HFLM does so for the requests hf-prefix hands it (here:
over-long ones).
"""

from __future__ import annotations

import copy

import pytest
from helpers import ForwardTokens, assert_same, generic_pairs, instances
from lm_eval.api.model import CachingLM, hash_args

LONG = "The quick brown fox jumps over the lazy dog. " * 6  # over max_length below
PAIRS = [*generic_pairs(), (LONG, " the end.")]


class Interrupted(Exception):
    """Stands for a crash or Ctrl-C in the middle of scoring."""


class ForwardCalls:
    """Counts forward calls; raises ``Interrupted`` at call ``stop_at`` (1-based)."""

    def __init__(self, model, stop_at: int | None = None) -> None:
        self.model, self.stop_at, self.calls = model, stop_at, 0

    def __enter__(self):
        def count(_module, _args, _kwargs):
            self.calls += 1
            if self.calls == self.stop_at:
                raise Interrupted(f"forward call {self.calls}")

        self.handle = self.model.register_forward_pre_hook(count, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


@pytest.fixture(scope="module")
def small_lm(hf_lm):
    """hf-prefix with one row per call (many passes) and a 24-token window."""
    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    return PrefixHFLM(
        pretrained=hf_lm.model, tokenizer=hf_lm.tokenizer, device="cpu", batch_size=1, max_length=24
    )


def _stored(db_path, pairs) -> dict[tuple[str, str], tuple[float, bool]]:
    from sqlitedict import SqliteDict

    with SqliteDict(str(db_path)) as db:
        keys = {hash_args("loglikelihood", pair): pair for pair in pairs}
        return {keys[key]: tuple(db[key]) for key in db.keys() if key in keys}


def test_interrupted_run_resumes_from_the_cache(small_lm, tmp_path):
    db_path = tmp_path / "cache.db"
    with ForwardCalls(small_lm.model) as clean_calls:
        clean = small_lm.loglikelihood(instances(PAIRS), disable_tqdm=True)
    assert clean_calls.calls >= 6  # enough passes to stop in the middle

    # First run: stopped at its middle forward call.
    lm = copy.copy(small_lm)  # its own cache hook
    caching = CachingLM(lm, str(db_path))
    with ForwardCalls(lm.model, stop_at=clean_calls.calls // 2 + 1), pytest.raises(Interrupted):
        caching.loglikelihood(instances(PAIRS))
    caching.dbdict.close()  # what the process would have written before it died
    stored = _stored(db_path, PAIRS)
    # The answers computed before the interruption are there, and they are the right ones.
    assert 0 < len(stored) < len(set(PAIRS))
    for pair, answer in stored.items():
        assert_same([clean[PAIRS.index(pair)]], [answer], [pair])

    # Second run on the same cache: the model gets only the requests still missing.
    lm = copy.copy(small_lm)
    asked: list[int] = []
    lm.loglikelihood = lambda requests: (
        asked.append(len(requests)) or type(lm).loglikelihood(lm, requests)
    )
    caching = CachingLM(lm, str(db_path))
    resumed = caching.loglikelihood(instances(PAIRS))
    caching.dbdict.close()
    missing = [pair for pair in PAIRS if pair not in stored]
    assert asked == [len(missing)]
    assert_same(clean, resumed, PAIRS)
    assert _stored(db_path, PAIRS).keys() == set(PAIRS)

    # Third run: everything from the cache, no forward call at all.
    lm = copy.copy(small_lm)
    caching = CachingLM(lm, str(db_path))
    with ForwardTokens(lm.model) as tokens:
        cached = caching.loglikelihood(instances(PAIRS))
    caching.dbdict.close()
    assert tokens.tokens == 0
    assert_same(clean, cached, PAIRS)


def test_each_answer_is_stored_when_computed(small_lm):
    """The hook sees every request (duplicates too, the over-long one via HFLM) in the
    order its answer is computed: by the time a forward call starts, the answers of all
    earlier calls have been handed over."""
    events: list[tuple] = []

    class Hook:
        def add_partial(self, attr, request, answer):
            events.append(("answer", attr, request, answer))

    lm = copy.copy(small_lm)
    lm.set_cache_hook(Hook())
    handle = lm.model.register_forward_pre_hook(lambda *_: events.append(("forward",)))
    try:
        answers = lm.loglikelihood(instances(PAIRS), disable_tqdm=True)
    finally:
        handle.remove()
    stored = [event[1:] for event in events if event[0] == "answer"]
    assert sorted(stored) == sorted(
        ("loglikelihood", pair, answer) for pair, answer in zip(PAIRS, answers, strict=True)
    )
    # hf-prefix's own answers come between its forward calls, not all at the end.
    own_answer = next(i for i, e in enumerate(events) if e[0] == "answer" and e[2][0] != LONG)
    last_forward = max(i for i, e in enumerate(events) if e[0] == "forward")
    assert own_answer < last_forward
    assert events[-1][0] == "answer"
