"""``dcpmi run --dcpmi_task TASK[=PREMISE]``: the option read, and the task YAMLs written.

Each ``--dcpmi_task`` names a registered multiple-choice task and, optionally, a domain
premise (without one, each document's premise's last word); its DC-PMI variant
``TASK_dcpmi`` is a by-name YAML (``base_task:``, see ``tasks/derive.py``, which also
writes it: ``dcpmi verify`` writes it again from the option a results file records)
into the run's temporary task folder.
"""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.tasks.derive import (
    DCPMI_TASK_OPTION,
    DERIVED_SUFFIX,
    option_value,
    parse_dcpmi_task,
    write_derived_tasks,
)

__all__ = [
    "DCPMI_TASK_OPTION",
    "DERIVED_SUFFIX",
    "option_value",
    "parse_dcpmi_task",
    "split_dcpmi_tasks",
    "write_derived_tasks",
]


def split_dcpmi_tasks(
    argv: Sequence[str],
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """``(base task, domain premise or None)`` of every ``--dcpmi_task``, and the other
    options."""
    derived: list[tuple[str, str | None]] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == DCPMI_TASK_OPTION:
            value = next(args, None)
            if value is None:
                raise DCPMIError(f"{DCPMI_TASK_OPTION} needs a value TASK or TASK=PREMISE.")
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
