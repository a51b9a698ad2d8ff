"""hf-prefix with several processes (``accelerate launch``), imitated on one CPU.

lm-eval splits documents across processes only when ``hf`` runs on several GPUs; the
processes then meet in collective calls (``accelerator.gather``): HFLM's batch-size
detection with ``batch_size=auto``, and hf-prefix's agreement on its self-check. A
collective call that only some processes make hangs the run. Here each rank is a view
of one PrefixHFLM (``world_size=2``, its own rank) run in its own thread, with a stub
accelerator whose ``gather`` really exchanges the ranks' tensors through a barrier and
records each call: a call one rank makes and the other does not breaks the barrier and
fails the test instead of hanging it.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from helpers import TOLERANCE, assert_same, generic_pairs, instances, load_task, plain_lm

WORLD_SIZE = 2
BARRIER_TIMEOUT_S = 60


class StubCollectives:
    """``accelerator.gather`` across ``WORLD_SIZE`` threads, one per rank, recorded."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(WORLD_SIZE, timeout=BARRIER_TIMEOUT_S)
        self.slots: list[torch.Tensor | None] = [None] * WORLD_SIZE
        self.calls: list[list[tuple]] = [[] for _ in range(WORLD_SIZE)]

    def accelerator(self, rank: int) -> StubAccelerator:
        return StubAccelerator(self, rank)


class StubAccelerator:
    def __init__(self, hub: StubCollectives, rank: int) -> None:
        self.hub, self.rank = hub, rank

    def unwrap_model(self, model):
        return model

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        hub = self.hub
        hub.calls[self.rank].append(("gather", tuple(tensor.shape), tensor.dtype))
        hub.slots[self.rank] = tensor.reshape(1) if tensor.dim() == 0 else tensor
        hub.barrier.wait()  # every rank has put its tensor
        gathered = torch.cat([slot for slot in hub.slots if slot is not None])
        hub.barrier.wait()  # every rank has read them all
        return gathered


def rank_views(lm, hub: StubCollectives, **attributes) -> list:
    """One shallow copy of ``lm`` per rank (same weights), with ``attributes`` set."""
    views = []
    for rank in range(WORLD_SIZE):
        view = copy.copy(lm)
        view._rank, view._world_size = rank, WORLD_SIZE
        view.accelerator = hub.accelerator(rank)
        for name, value in attributes.items():
            setattr(view, name, value)
        views.append(view)
    return views


def on_every_rank(work) -> list:
    """``work(rank)`` in one thread per rank, concurrently; each rank's result."""
    with ThreadPoolExecutor(WORLD_SIZE) as pool:
        futures = [pool.submit(work, rank) for rank in range(WORLD_SIZE)]
        return [future.result(timeout=10 * BARRIER_TIMEOUT_S) for future in futures]


@pytest.fixture(scope="module")
def prefix_lm(hf_lm):
    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    return PrefixHFLM(pretrained=hf_lm.model, tokenizer=hf_lm.tokenizer, device="cpu", batch_size=8)


# ---------------------------------------------------------------- the self-check
def test_self_check_decision_is_agreed_one_collective_per_setup(prefix_lm):
    """A rank whose check fails the packed rows makes every rank use one per row: each
    rank makes one collective call per setup tried (packed rows, then one per row)."""
    hub = StubCollectives()
    views = rank_views(prefix_lm, hub)
    views[1]._check_setup = lambda setup, reduced: "made-up failure" if setup.packed else None
    setups = on_every_rank(lambda rank: views[rank]._decide_setup())
    assert setups[0] == setups[1] == dataclasses.replace(prefix_lm._setup, packed=False)
    assert hub.calls[0] == hub.calls[1] == [("gather", (1,), torch.int64)] * 2


def test_one_failing_rank_makes_every_rank_fall_back(prefix_lm):
    hub = StubCollectives()
    views = rank_views(prefix_lm, hub)
    views[0]._probe = lambda layout, reduced: "made-up: no plain cache on this rank"
    assert on_every_rank(lambda rank: views[rank]._decide_setup()) == [None, None]
    assert hub.calls[0] == hub.calls[1] == [("gather", (1,), torch.int64)] * 2


# ---------------------------------------------------------------- scoring
LONG = "The quick brown fox jumps over the lazy dog. " * 6  # over max_length below


@pytest.mark.parametrize(
    "rank1_pairs",
    [
        pytest.param(generic_pairs()[5:9], id="fewer-shorter"),
        pytest.param([], id="none"),
    ],
)
def test_ranks_make_the_same_collective_calls(hf_lm, prefix_lm, rank1_pairs):
    """batch_size=auto, over-long requests on rank 0 only: each rank makes exactly one
    collective call (the batch-size detection), whatever its requests."""
    rank0_pairs = [*generic_pairs(), (LONG, " the end."), (LONG, " more")]
    pairs = [rank0_pairs, rank1_pairs]
    hub = StubCollectives()
    views = rank_views(prefix_lm, hub, batch_size_per_gpu="auto", max_batch_size=2, _max_length=24)
    assert views[0].max_length == 24 and views[0].batch_size == "auto"
    got = on_every_rank(
        lambda rank: views[rank].loglikelihood(instances(pairs[rank]), disable_tqdm=True)
    )
    assert hub.calls[0] == hub.calls[1] == [("gather", (1,), torch.int64)]
    # The answers are hf's with the same window (over-long requests left-truncated).
    hf_short = plain_lm(hf_lm, batch_size=8, max_length=24)
    for rank in range(WORLD_SIZE):
        expected = hf_short.loglikelihood(instances(pairs[rank]), disable_tqdm=True)
        assert_same(expected, got[rank], [f"rank {rank} {p!r:.60}" for p in pairs[rank]])


# ---------------------------------------------------------------- real tasks, split
SPLIT_TASKS = ("dcpmi_copa", "dcpmi_sst5")
SPLIT_LIMIT = 6


def _by_request(instances, answers) -> dict[tuple[int, int], tuple[float, bool]]:
    return {(i.doc_id, i.idx): answer for i, answer in zip(instances, answers, strict=True)}


@pytest.mark.parametrize("name", SPLIT_TASKS)
def test_rank_split_requests_score_as_unsplit(hf_lm, prefix_lm, task_manager, name):
    """Each document's loglikelihoods are the same whichever rank scores it, with
    hf-prefix (two ranks, batch_size=auto, stub collectives) and with hf."""
    task = load_task(task_manager, name)
    task.build_all_requests(limit=SPLIT_LIMIT, rank=0, world_size=1)
    unsplit = list(task.instances)
    split = []
    for rank in range(WORLD_SIZE):
        task.build_all_requests(limit=SPLIT_LIMIT, rank=rank, world_size=WORLD_SIZE)
        split.append(list(task.instances))
    docs = [sorted({i.doc_id for i in instances}) for instances in split]
    assert docs == [[0, 2, 4], [1, 3, 5]]

    hub = StubCollectives()
    views = rank_views(prefix_lm, hub, batch_size_per_gpu="auto", max_batch_size=4)
    prefix_split = on_every_rank(
        lambda rank: views[rank].loglikelihood(split[rank], disable_tqdm=True)
    )
    assert hub.calls[0] == hub.calls[1] == [("gather", (1,), torch.int64)]

    results = {
        ("hf-prefix", "unsplit"): _by_request(
            unsplit, prefix_lm.loglikelihood(unsplit, disable_tqdm=True)
        ),
        ("hf", "unsplit"): _by_request(unsplit, hf_lm.loglikelihood(unsplit, disable_tqdm=True)),
        ("hf-prefix", "split"): {},
        ("hf", "split"): {},
    }
    for rank in range(WORLD_SIZE):
        results[("hf-prefix", "split")].update(_by_request(split[rank], prefix_split[rank]))
        results[("hf", "split")].update(
            _by_request(split[rank], hf_lm.loglikelihood(split[rank], disable_tqdm=True))
        )
    reference = results[("hf", "unsplit")]
    assert len(reference) == len(unsplit)
    for label, answers in results.items():
        # a task with content-free requests has one carrier per process: rank 1's first
        # document carries a second, identical block
        extra = answers.keys() - reference.keys()
        assert all(key[0] == docs[1][0] for key in extra), label
        assert answers.keys() - extra == reference.keys(), label
        for key, (want_ll, want_greedy) in reference.items():
            ll, greedy = answers[key]
            assert abs(ll - want_ll) <= TOLERANCE, (label, key, ll, want_ll)
            assert greedy == want_greedy, (label, key)
