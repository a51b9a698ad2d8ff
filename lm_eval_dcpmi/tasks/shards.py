"""``dcpmi run --shard K/N``: the K-th of N deterministic shares of every task's documents.

Shard K of N holds the documents whose index i has ``i % N == K - 1``, as lm-eval's own
data parallelism deals them to its ranks (``utils.create_iterator``: ``islice(rank, None,
world_size)``): every shard gets the same mix of a split's parts (HellaSwag's ActivityNet
and WikiHow halves), and the N shards together hold each document exactly once. lm-eval
scores them as ``--samples`` indices (their samples keep the split's document ids); the
results file records the shard under ``dcpmi.shard``, which ``dcpmi merge`` reads to join
the shards into one run. ``--shard slurm`` (or ``slurm/N``, ``kubernetes/N``) reads K and N
from the scheduler's array job instead (``array_jobs``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.tasks.array_jobs import is_scheduler, scheduler_shard
from lm_eval_dcpmi.tasks.quick_look import take_option

SHARD_OPTION = "--shard"
_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int
    # where a scheduler's spelling found K (e.g. "SLURM_ARRAY_TASK_ID=3 of the array 1-8")
    source: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def indices(self, documents: int) -> list[int]:
        """This shard's document indices of a split of ``documents``, in order."""
        return list(range(self.index - 1, documents, self.count))

    def as_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def parse_shard(
    value: str, option: str = SHARD_OPTION, environ: Mapping[str, str] | None = None
) -> Shard:
    """``K/N`` with 1 <= K <= N, or a scheduler's spelling read from ``environ`` (default
    the process's environment); a ``DCPMIError`` saying the form otherwise."""
    if is_scheduler(value):
        index, count, source = scheduler_shard(
            value, os.environ if environ is None else environ, option
        )
        return Shard(index, count, source)
    match = _FORM.match(value)
    index, count = (int(match[1]), int(match[2])) if match else (0, 0)
    if not match or count < 1 or not 1 <= index <= count:
        raise DCPMIError(
            f"{option} {value!r}: give K/N, shard K of N with 1 <= K <= N (e.g. {option} 1/4 "
            f"... {option} 4/4; dcpmi merge joins them), or {option} slurm in an array job."
        )
    return Shard(index, count)


def split_shard(argv: Sequence[str]) -> tuple[Shard | None, list[str]]:
    """``--shard K/N`` (or ``--shard=K/N``) taken out of ``argv``: (the shard or None, the rest)."""
    return take_option(argv, SHARD_OPTION, parse_shard)


def refuse_with(shard: Shard, options: Mapping[str, Any]) -> None:
    """A shard picks its own documents: not with ``--limit``, ``--samples`` or ``--quick``
    (``options``: option -> its value, None when not given)."""
    for option, value in options.items():
        if value is not None:
            raise DCPMIError(
                f"{SHARD_OPTION} {shard} scores every {shard.count}th document of each task "
                f"and cannot be combined with {option}; drop one of the two."
            )


def refuse_unmergeable(shard: Shard, tasks: Mapping[str, Any]) -> None:
    """Every task of a shard must be one ``dcpmi merge`` can merge: it recomputes each number
    it writes from the DC-PMI metrics, so a plain lm-eval task (a ``--dcpmi_task``'s base
    beside its variant) is refused here, before any shard scores, not at the merge."""
    from lm_eval_dcpmi.tasks.dcpmi_task import DCPMITask

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
