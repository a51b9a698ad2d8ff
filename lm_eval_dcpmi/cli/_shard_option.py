"""``--shard``'s value read: ``K/N``, or ``slurm``, ``slurm/N`` and ``kubernetes/N``, the
shard's K (and N) read from the scheduler that runs one job per shard, so a job file never
computes them.

* **SLURM** (an array job, ``sbatch --array``): K is ``SLURM_ARRAY_TASK_ID``. With
  ``slurm``, the array is the run: N is its task count, and the array must be exactly
  ``1-N`` (``SLURM_ARRAY_TASK_MIN`` 1, a step of 1 and ``SLURM_ARRAY_TASK_MAX`` equal to
  ``SLURM_ARRAY_TASK_COUNT``), since any other array leaves shards that never run or
  numbers that are not shards. With ``slurm/N``, N is given and the array may be any of
  the shards 1..N: the whole run (``--array=1-N``), or the ones submitted again after a
  failure (``--array=3``, ``--array=2,5``). Either way the array's variables must agree
  (1 task or more, a step of 1 or more, a count its range can hold) and hold the ID, on its
  step: SLURM sets them itself, so any other (e.g. ID 0 or 9 of the array 1-8) was set by
  hand, and is refused rather than dealing documents to a shard that is none.
* **Kubernetes** (an Indexed Job, ``completionMode: Indexed``): K is
  ``JOB_COMPLETION_INDEX + 1`` (the index starts at 0); a pod is not told the Job's
  ``completions``, so N is given: ``kubernetes/N`` (or ``k8s/N``).

Missing variables, or values that do not fit (each a whole number in the digits 0-9 alone,
at most 18 of them), are refused in one line naming the variable and its value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.task import SHARD_OPTION, Shard

SLURM = "slurm"
KUBERNETES = ("kubernetes", "k8s")
SCHEDULERS = (SLURM, *KUBERNETES)
ARRAY = (
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
)
INDEX = "JOB_COMPLETION_INDEX"
_FORM = re.compile(r"^\s*([0-9]{1,18})\s*/\s*([0-9]{1,18})\s*$")
_DIGITS = re.compile(r"[0-9]+")
_MOST_DIGITS = 18  # any array index or count fits, and no number shown runs on


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


def is_scheduler(value: str) -> bool:
    """Whether ``value`` (``--shard``'s) names a scheduler rather than K/N."""
    return value.strip().partition("/")[0].strip().lower() in SCHEDULERS


def scheduler_shard(value: str, environ: Mapping[str, str], option: str) -> tuple[int, int, str]:
    """``(K, N, where K came from)`` for ``--shard VALUE`` naming a scheduler."""
    name, slash, count_text = (part.strip() for part in value.strip().partition("/"))
    name = name.lower()
    shown = value.strip()
    # the value as typed, unless it holds what a one-line message cannot (a newline)
    spelled = f"{option} {shown if shown.isprintable() else repr(shown)}"
    count = None
    if slash:
        number = _number(count_text)
        count = number if isinstance(number, int) else 0
        if count < 1:
            raise DCPMIError(
                f"{spelled}: N must be a whole number of shards, 1 or more (e.g. {option} "
                f"{name}/8)."
            )
    if name == SLURM:
        return slurm_shard(count, environ, spelled)
    if count is None:
        raise DCPMIError(
            f"{spelled}: give N too, the Job's completions (e.g. {option} {name}/8): a pod of "
            f"an Indexed Job knows only its own {INDEX}."
        )
    return kubernetes_shard(count, environ, spelled)


def _number(text: str | None) -> int | str:
    """``text`` as a whole number when it is one in the digits 0-9 alone (what a scheduler
    writes), else why not: "not set", or the value as a user sees it."""
    if text is None:
        return "not set"
    if not _DIGITS.fullmatch(text):
        shown = text if len(text) <= 24 else f"{text[:20]}..."
        return f"{shown!r}, not a whole number in the digits 0-9 alone"
    if len(text) > _MOST_DIGITS:
        return f"a number of {len(text)} digits, larger than any scheduler's"
    return int(text)


def _whole(environ: Mapping[str, str], name: str, spelled: str) -> int:
    number = _number(environ.get(name))
    if isinstance(number, str):
        raise DCPMIError(
            f"{spelled}: {name} is {number}; run it as a task of an array job (sbatch "
            "--array=1-N), or give --shard K/N."
        )
    return number


def _check_array(
    spelled: str, task: int, first: int, last: int, tasks: int, step: int, count: int | None
) -> str:
    """The array, as shown, once SLURM's array variables agree with each other and hold
    ``task``: an empty array, a step of 0, a count its range cannot hold, or an ID outside
    it or between its indices (variables set or changed by hand) is refused."""
    array = f"{first}-{last}" + (f":{step}" if step != 1 else "")
    array += f" ({tasks} task{'s' if tasks != 1 else ''})"
    fix = (
        "SLURM sets these variables itself: unset any set by hand and submit the job with "
        f"sbatch --array=1-{'N' if count is None else count}, or give --shard K/N."
    )
    fewest, most = (1 if first == last else 2), (last - first) // max(step, 1) + 1
    if tasks < 1:
        wrong = f"SLURM_ARRAY_TASK_COUNT is {tasks}, so the array {array} is empty"
    elif step < 1:
        wrong = f"SLURM_ARRAY_TASK_STEP is {step}, so the array {array} never steps on"
    elif first > last:
        wrong = f"SLURM_ARRAY_TASK_MIN is {first}, above SLURM_ARRAY_TASK_MAX in the array {array}"
    elif not fewest <= tasks <= most:
        holds = f"{fewest} task" if fewest == most else f"{fewest} to {most} tasks"
        wrong = f"SLURM_ARRAY_TASK_COUNT is {tasks}, but an array {array.split()[0]} holds {holds}"
    elif not first <= task <= last:
        wrong = f"{ARRAY[0]} is {task}, outside the array {array}"
    elif (task - first) % step:
        wrong = f"{ARRAY[0]} is {task}, between the indices of the array {array}, {step} apart"
    else:
        return array
    raise DCPMIError(f"{spelled}: {wrong}; {fix}")


def slurm_shard(
    count: int | None, environ: Mapping[str, str], spelled: str
) -> tuple[int, int, str]:
    """K from ``SLURM_ARRAY_TASK_ID``; N ``count``, or the array's own (see the module)."""
    if ARRAY[0] not in environ:
        where = (
            "a SLURM job, but not a task of an array job"
            if "SLURM_JOB_ID" in environ
            else "not a task of a SLURM array job"
        )
        raise DCPMIError(
            f"{spelled}: {ARRAY[0]} is not set ({where}); submit it with sbatch --array=1-N, "
            "or give --shard K/N."
        )
    task, first, last, tasks, step = (_whole(environ, name, spelled) for name in ARRAY)
    array = _check_array(spelled, task, first, last, tasks, step, count)
    where = f"{ARRAY[0]}={task} of the array {array}"
    if count is not None:  # the run's N, and some or all of its shards
        if first < 1 or last > count:
            raise DCPMIError(
                f"{spelled}: the array {array} holds indices outside the shards 1-{count}; "
                f"submit --array=1-{count}, or only the shards to run again (e.g. --array=3)."
            )
        return task, count, where
    if first != 1:
        raise DCPMIError(
            f"{spelled}: the array {array} does not start at 1; shards are 1..N: submit "
            "--array=1-N (or give N for some of them only: --shard slurm/N)."
        )
    if step != 1:
        raise DCPMIError(
            f"{spelled}: the array {array} has a step of {step}, so the shards between its "
            "tasks would never run; submit --array=1-N."
        )
    if tasks != last:
        raise DCPMIError(
            f"{spelled}: the array {array} holds {tasks} tasks but goes up to {last}, so its "
            f"count differs from N; submit --array=1-N (or give N: --shard slurm/N)."
        )
    return task, tasks, where


def kubernetes_shard(count: int, environ: Mapping[str, str], spelled: str) -> tuple[int, int, str]:
    """K from ``JOB_COMPLETION_INDEX`` (0-based) of an Indexed Job of ``count`` completions."""
    index = _number(environ.get(INDEX))
    if isinstance(index, str):
        raise DCPMIError(
            f"{spelled}: {INDEX} is {index} (not a pod of an Indexed Job); run it in a Job "
            f"with completionMode: Indexed and completions: {count}, or give --shard K/N."
        )
    if index >= count:
        raise DCPMIError(
            f"{spelled}: {INDEX} is {index}, but {count} shards are indices 0-{count - 1}; "
            "give the Job's completions as N."
        )
    return index + 1, count, f"{INDEX}={index}"
