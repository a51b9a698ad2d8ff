"""``dcpmi run --dcpmi_task TASK=PREMISE``: the option read, and the task YAMLs written.

Each ``--dcpmi_task`` names a registered multiple-choice task and a domain premise; its
DC-PMI variant ``TASK_dcpmi`` is a by-name YAML (``base_task:``, see ``tasks/derive.py``)
written into the run's temporary task folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lm_eval_dcpmi.errors import DCPMIError

DCPMI_TASK_OPTION = "--dcpmi_task"
DERIVED_SUFFIX = "_dcpmi"


def split_dcpmi_tasks(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """``(base task, domain premise)`` of every ``--dcpmi_task``, and the other options."""
    derived: list[tuple[str, str]] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == DCPMI_TASK_OPTION:
            value = next(args, None)
            if value is None:
                raise DCPMIError(f"{DCPMI_TASK_OPTION} needs a value TASK=PREMISE.")
        elif arg.startswith(DCPMI_TASK_OPTION + "="):
            value = arg[len(DCPMI_TASK_OPTION) + 1 :]
        else:
            rest.append(arg)
            continue
        derived.append(parse_dcpmi_task(value))
    bases = [base for base, _premise in derived]
    repeated = sorted({base for base in bases if bases.count(base) > 1})
    if repeated:
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} names {', '.join(repeated)} more than once; give each base "
            "task one domain premise per run (its variant is named <task>_dcpmi)."
        )
    return derived, rest


def parse_dcpmi_task(value: str) -> tuple[str, str]:
    """``'arc_easy=Answer:'`` -> ``('arc_easy', 'Answer:')`` (the premise is kept verbatim)."""
    base, equals, premise = value.partition("=")
    base = base.strip()
    if not equals or not base or not premise:
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} {value!r}: expected TASK=PREMISE with a registered "
            f'multiple-choice task and a non-empty domain premise, e.g. arc_easy="Answer:".'
        )
    # TASK names a file of the temporary task folder: nothing that leads out of it.
    bad = next((c for c in base if c in "/\\" or not c.isprintable()), None)
    if bad is not None or base.startswith((".", "-")):
        what = f"it holds {bad!r}" if bad is not None else f"it starts with {base[0]!r}"
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} {value!r}: {base!r} is not a task name ({what}); TASK is "
            "the name of a registered task, e.g. arc_easy (for a task of your own, give its "
            "folder with --include_path and its name here)."
        )
    return base, premise


def derived_task_config(base: str, premise: str) -> dict[str, Any]:
    """The by-name DC-PMI YAML for ``base`` (written out with the function tag added); its
    metadata holds the option, which results and errors name as the task's source (the
    YAML itself is a temporary file; see ``tasks/derive.py``)."""
    from lm_eval_dcpmi.tasks.derive import DCPMI_TASK_KEY

    return {
        "task": base + DERIVED_SUFFIX,
        "base_task": base,
        "domain_premise": premise,
        "metadata": {DCPMI_TASK_KEY: f"{base}={premise}"},
    }


def write_derived_tasks(derived: Sequence[tuple[str, str]], folder: Path) -> list[str]:
    """One YAML per ``(base, premise)`` in ``folder``; returns the new task names."""
    names = []
    for base, premise in derived:
        config = derived_task_config(base, premise)
        path = folder / f"{config['task']}.yaml"
        if path.resolve().parent != folder.resolve():  # parse_dcpmi_task rules this out
            raise DCPMIError(f"{DCPMI_TASK_OPTION} {base}: not a task name.")
        text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
        text += "class: !function lm_eval_dcpmi.task.DCPMITask\n"
        path.write_text(text, encoding="utf-8")
        names.append(config["task"])
    return names
