"""``dcpmi merge SHARDS... --out DIR``: the shards of one run joined into that run
(``lm_eval_dcpmi.merging._merge``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_dcpmi.cli._subcommand import SubCommand
from lm_eval_dcpmi.errors import DCPMIError, printable

MERGE_DESCRIPTION = """\
Joins the shards of one run (the --output_path folders of `dcpmi run --shard K/N
--log_samples`, K = 1..N) into that run: one results file and one samples file per task
under --out, which verify, report and export read as if from one run. Refused, in one line
naming the shard: shards of other commits, models, lm-eval versions, task configs or
premises; two of the same K; a missing K (unless --allow-partial, which marks the result
partial); a shard without its samples, or whose samples are not its share of the split or
hold per-document values their loglikelihoods do not give; a K/N or split size other
than the data allows (each task is built from the data: --data_dir, --include_path); a
document in two shards; --out inside a shard's folder; names that lead out of --out. CC
is decided with document 0's content-free scores and BC over every document, as in one
run."""


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shards", nargs="+", type=Path, help="the shards' folders or results files")
    parser.add_argument(
        "--out", required=True, type=Path, help="a new folder to write the run into"
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge without some shards; the result is marked partial",
    )
    # the tasks are built from the data, to bound the counts the shards record
    parser.add_argument("--data_dir", help="the data folder (default: $DCPMI_DATA_DIR)")
    parser.add_argument(
        "--include_path",
        action="append",
        default=[],
        help="a folder of task YAMLs that are not installed (your own tasks; repeatable)",
    )
    parser.add_argument(
        "--tokenizer",
        help="the tokenizer that counts acc_avg's tokens, when the model is not at hand "
        "under its recorded name (a local folder is recorded as <local>/NAME)",
    )


def run_merge(args: argparse.Namespace) -> int:
    from lm_eval_dcpmi.merging import merge

    try:
        written = merge(
            args.shards,
            args.out,
            args.allow_partial,
            args.data_dir,
            tuple(args.include_path),
            args.tokenizer,
        )
    except DCPMIError as error:
        print(f"dcpmi merge: {printable(str(error))}", file=sys.stderr)
        return 2
    for path in written:
        print(printable(f"wrote {path}"))
    return 0


class Merge(SubCommand):
    name = "merge"
    help = "join the shards of one run (dcpmi run --shard K/N) into that run"
    description = MERGE_DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_merge_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return run_merge(args)
