"""``dcpmi run --shard K/N``: the K-th of N deterministic shares of every task's documents.

Shard K of N holds the documents whose index i has ``i % N == K - 1``, as lm-eval's own
data parallelism deals them to its ranks (``utils.create_iterator``: ``islice(rank, None,
world_size)``): every shard gets the same mix of a split's parts (HellaSwag's ActivityNet
and WikiHow halves), and the N shards together hold each document exactly once. K and N are
whole numbers with 1 <= K <= N: ``Shard`` refuses any other, so no shard starts at a
negative index (``-1``, Python's last document). lm-eval scores them as ``--samples``
indices (their samples keep the split's document ids); the results file records the shard
under ``dcpmi.shard``, which ``dcpmi merge`` reads to join the shards into one run.
``--shard slurm`` (or ``slurm/N``, ``kubernetes/N``) reads K and N from the scheduler's
array job instead (``cli/_shard_option.py`` reads the option, and checks K against the
array before any shard is made).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError

SHARD_OPTION = "--shard"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int
    # where a scheduler's spelling found K (e.g. "SLURM_ARRAY_TASK_ID=3 of the array 1-8")
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_shard(self.index, self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def indices(self, documents: int) -> list[int]:
        """This shard's document indices of a split of ``documents``, in order: from
        ``index - 1``, never below 0 (checked again here, where a negative start would
        deal Python's last document, ``-1``, into the shard)."""
        check_shard(self.index, self.count)
        return list(range(self.index - 1, documents, self.count))

    def as_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def check_shard(index: object, count: object) -> None:
    """A ``DCPMIError`` unless ``index``/``count`` is K/N, whole numbers with 1 <= K <= N:
    every shard's start, K - 1, is then a document index 0 or more."""
    if not (
        isinstance(index, int)
        and isinstance(count, int)
        and not isinstance(index, bool)
        and not isinstance(count, bool)
        and 1 <= index <= count
    ):
        raise DCPMIError(
            f"shard {index!r}/{count!r} is not K/N, shard K of N with whole numbers "
            f"1 <= K <= N (e.g. {SHARD_OPTION} 1/4 ... {SHARD_OPTION} 4/4)."
        )


def refuse_unmergeable(shard: Shard, tasks: Mapping[str, Any]) -> None:
    """Every task of a shard must be one ``dcpmi merge`` can merge: it recomputes each number
    it writes from the DC-PMI metrics, so a plain lm-eval task (a ``--dcpmi_task``'s base
    beside its variant) is refused here, before any shard scores, not at the merge."""
    from lm_eval_dcpmi.task._dcpmi_task import DCPMITask

    others = [name for name, task in tasks.items() if not isinstance(task, DCPMITask)]
    if others:
        raise DCPMIError(
            f"{SHARD_OPTION} {shard}: {others[0]!r} is no DC-PMI task, and dcpmi merge, which "
            "recomputes every number from the DC-PMI metrics, could not merge its shards; "
            "score it in a run of its own, unsharded (for a --dcpmi_task variant, leave its "
            "base task out of --tasks)."
        )


def shard_samples(sizes: Mapping[str, int], shard: Shard) -> dict[str, list[int]]:
    """lm-eval's ``--samples`` for ``shard`` (``sizes``: task -> documents in its split).
    A task with fewer documents than shards has none in the later shards: refused, since
    lm-eval would then score it whole."""
    samples = {}
    for name, total in sizes.items():
        indices = shard.indices(total)
        if not indices:
            raise DCPMIError(
                f"{SHARD_OPTION} {shard}: {name} has {total} document(s), fewer than "
                f"{shard.count} shards, so shard {shard.index} would hold none of it; use at "
                f"most {total} shards, or run {name} without {SHARD_OPTION}."
            )
        samples[name] = indices
    return samples
