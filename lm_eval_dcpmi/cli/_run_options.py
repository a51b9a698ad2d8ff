"""``dcpmi run``'s own options, taken out of its command line in one pass and parsed once:
what the rest of the plugin receives is typed (the derived tasks, a hub id, a count, a
shard), never the argument list. Every other item is lm-eval's, kept in its order.

Each option is one row of ``OPTIONS``: its name, how its value is read, what a second use
means (collected, the last one wins, or refused) and what a missing value says. An option is
``NAME VALUE`` or ``NAME=VALUE``; a missing value is a ``NAME`` at the end, or followed by
another of these options.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi._identity import check_hub_id
from lm_eval_dcpmi.cli._shard_option import parse_shard
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.task import (
    DCPMI_TASK_OPTION,
    QUICK_OPTION,
    SHARD_OPTION,
    Shard,
    parse_dcpmi_task,
)

MODEL_ID_OPTION = "--model_id"


@dataclass(frozen=True)
class RunOptions:
    """``dcpmi run``'s own options, parsed."""

    # --dcpmi_task TASK[=PREMISE], each: (base task, domain premise or None for its default)
    dcpmi_tasks: tuple[tuple[str, str | None], ...] = ()
    model_id: str | None = None  # --model_id ORG/NAME, a checked hub id
    quick: int | None = None  # --quick N: documents a task, spread over its split
    shard: Shard | None = None  # --shard K/N, or a scheduler's spelling


def quick_count(value: str) -> int:
    """``--quick``'s N: a whole number, 1 or more."""
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise DCPMIError(
            f"{QUICK_OPTION} {value!r}: expected a whole number of documents per task, at "
            f"least 1, e.g. {QUICK_OPTION} 50."
        )
    return count


@dataclass(frozen=True)
class Option:
    """One of the plugin's options: ``field`` of ``RunOptions``; ``repeat``: "collect",
    "last" (the last one given wins) or "once" (given twice: refused); ``missing``: the
    error for a missing value, or None to read it as ``""``."""

    name: str
    field: str
    parse: Callable[[str, Mapping[str, str]], Any]
    repeat: str
    missing: str | None = None


OPTIONS = (
    Option(
        DCPMI_TASK_OPTION,
        "dcpmi_tasks",
        lambda value, _environ: parse_dcpmi_task(value),
        "collect",
        f"{DCPMI_TASK_OPTION} needs a value TASK or TASK=PREMISE.",
    ),
    Option(
        MODEL_ID_OPTION,
        "model_id",
        lambda value, _environ: value,  # checked once the last one is known
        "last",
        f"{MODEL_ID_OPTION} needs a value: the model's hub id, ORG/NAME.",
    ),
    Option(QUICK_OPTION, "quick", lambda value, _environ: quick_count(value), "once"),
    Option(
        SHARD_OPTION, "shard", lambda value, environ: parse_shard(value, environ=environ), "once"
    ),
)
_BY_NAME = {option.name: option for option in OPTIONS}


def _named(item: str) -> Option | None:
    return _BY_NAME.get(item.partition("=")[0])


def split_run_options(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[RunOptions, list[str]]:
    """The plugin's options of ``argv`` parsed (``environ``: where ``--shard slurm`` reads
    the scheduler's variables, default the process's), and lm-eval's options, in order."""
    environ = os.environ if environ is None else environ
    found: dict[str, list[Any]] = {option.field: [] for option in OPTIONS}
    rest: list[str] = []
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        index += 1
        option = _named(item)
        if option is None:
            rest.append(item)
            continue
        name, equals, value = item.partition("=")
        if not equals:
            given = index < len(items) and _named(items[index]) is None
            if not given and option.missing is not None:
                raise DCPMIError(option.missing)
            value = items[index] if given else ""
            index += int(given)
        if option.repeat == "once" and found[option.field]:
            raise DCPMIError(f"{name} is given twice; give it once.")
        found[option.field].append(option.parse(value, environ))
    bases = [base for base, _premise in found["dcpmi_tasks"]]
    repeated = sorted({base for base in bases if bases.count(base) > 1})
    if repeated:
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} names {', '.join(repeated)} more than once; give each base "
            "task one domain premise per run (its variant is named <task>_dcpmi)."
        )
    model_id = found["model_id"][-1] if found["model_id"] else None
    options = RunOptions(
        dcpmi_tasks=tuple(found["dcpmi_tasks"]),
        model_id=None if model_id is None else check_hub_id(model_id),
        quick=found["quick"][0] if found["quick"] else None,
        shard=found["shard"][0] if found["shard"] else None,
    )
    return options, rest


def refuse_combinations(options: RunOptions, limit: float | None, samples: Any) -> None:
    """A shard and ``--quick`` pick their own documents: neither goes with ``--limit`` or
    ``--samples``, nor with the other."""
    shard, quick = options.shard, options.quick
    if shard is not None:
        for option, value in (("--limit", limit), ("--samples", samples), ("--quick", quick)):
            if value is not None:
                raise DCPMIError(
                    f"{SHARD_OPTION} {shard} scores every {shard.count}th document of each "
                    f"task and cannot be combined with {option}; drop one of the two."
                )
    if quick is not None:
        for option, value in (("--limit", limit), ("--samples", samples)):
            if value is not None:
                raise DCPMIError(
                    f"{QUICK_OPTION} {quick} picks {quick} documents evenly spread over each "
                    f"task's split and cannot be combined with {option}; drop one of the two."
                )


def option_values(argv: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(option, value) for each ``--option value`` and ``--option=value`` of lm-eval's
    options (read, not taken out: ``_lm_eval_options`` checks the JSON ones)."""
    for index, item in enumerate(argv):
        if not item.startswith("-"):
            continue
        option, equals, value = item.partition("=")
        if equals:
            yield option, value
        elif index + 1 < len(argv):
            yield option, argv[index + 1]
