"""What the shards' results files must hold for ``dcpmi merge`` to join them, beyond what
``_merge.check_one_run`` compares across them (``check_mergeable``).

Merge copies the first shard's results file and replaces what it recomputes, so anything
else in it would pass into the merged run as if it were over the whole split:

* its sections are JSON objects (``results``, ``n-samples``, ``configs``, ...);
* every entry of ``results`` is a DC-PMI task that merge recomputes, or a group of them, and
  every entry of ``n-samples`` is such a task;
* each task's entry reports the same metrics in every shard: one that a shard lacks would be
  left out of the merged run, or reported from the other shards alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError

SECTIONS = ("results", "n-samples", "configs", "versions", "n-shot", "higher_is_better",
            "task_hashes", "group_subtasks")  # fmt: skip
NOT_WRITTEN_BY_DCPMI = "not a results file that dcpmi run wrote"


def check_mergeable(shards: Sequence[Any], tasks: Sequence[str]) -> None:
    """Refuse, naming the shard and the entry, what merge would copy without recomputing
    it (see the module). ``shards``: ``_merge.ShardRun``s; ``tasks``: the DC-PMI tasks."""
    for run in shards:
        for section in SECTIONS:
            if section in run.data and not isinstance(run.data[section], dict):
                raise DCPMIError(
                    f"{run}: its {section} is {type(run.data[section]).__name__}, not an "
                    f"object; {NOT_WRITTEN_BY_DCPMI}."
                )
    groups = shards[0].data.get("group_subtasks") or {}
    for group, members in groups.items():
        if members and not (
            isinstance(members, list) and all(m in tasks or m in groups for m in members)
        ):
            raise DCPMIError(
                f"{shards[0]}: group {group!r} lists {_shown(members)}, not tasks of the shards; "
                f"{NOT_WRITTEN_BY_DCPMI}."
            )
    for run in shards:
        others = [k for k in run.data["results"] if k not in tasks and not groups.get(k)]
        if others:
            raise DCPMIError(
                f"{run}: its results hold {others[0]!r}, which is neither a DC-PMI task nor a "
                "group of them: merge recomputes every number it writes, and cannot this "
                "one's; score it in one run."
            )
        counted = [k for k in run.data.get("n-samples") or {} if k not in tasks]
        if counted:
            raise DCPMIError(
                f"{run}: its n-samples count documents of {counted[0]!r}, which its results "
                f"do not hold as a DC-PMI task; {NOT_WRITTEN_BY_DCPMI}."
            )
    for name in tasks:
        first = _metrics(shards[0], name)
        for run in shards[1:]:
            other = _metrics(run, name)
            if other != first:
                odd = sorted(other ^ first)[0]
                lacking, having = (run, shards[0]) if odd in first else (shards[0], run)
                raise DCPMIError(
                    f"{lacking} ({name}): reports no {odd}, which {having} reports; the "
                    "shards of one run report the same metrics."
                )


def _metrics(run: Any, task: str) -> set[str]:
    entry = run.data["results"].get(task)
    return {str(k) for k in entry if "," in str(k)} if isinstance(entry, dict) else set()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
