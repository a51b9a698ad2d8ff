"""``dcpmi report RESULTS... [--out DIR] [--format FMT] [--options-csv FILE]``: paper-style
tables and figures from lm-eval results files (``lm_eval_dcpmi.report``)."""

from __future__ import annotations

import argparse

from lm_eval_dcpmi.cli._subcommand import SubCommand


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``dcpmi report``'s arguments to ``parser`` (a subcommand's parser)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS",
        help="lm-eval results_*.json files or --output_path folders (of a folder, the "
        "newest DC-PMI results file of every model subfolder); samples_*.jsonl files beside "
        "them (--log_samples) add intervals and significance",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="write report.md/.csv, summary.md/.csv (several models), intervals.csv (with "
        "samples), figure_<model>.png and figure_<model>_<study>.png here",
    )
    parser.add_argument(
        "--format",
        dest="formats",
        metavar="FMT",
        action="append",
        default=None,
        help="only these outputs: md, csv, png (repeat or comma-separate; default all)",
    )
    parser.add_argument(
        "--options-csv",
        dest="options_csv",
        metavar="FILE",
        default=None,
        help="write one row per (task, document, option) of the logged samples: "
        "loglikelihoods, token and character counts, gold and each method's pick",
    )
    return parser


class Report(SubCommand):
    name = "report"
    help = "tables and figures from lm-eval results files, like the paper's"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        # through the module, so that a test can stand in for report_command
        from lm_eval_dcpmi.report import report_command

        formats = None
        if args.formats:
            formats = [f.strip() for item in args.formats for f in item.split(",") if f.strip()]
        return report_command(
            args.paths, args.out, formats, options_csv=getattr(args, "options_csv", None)
        )
