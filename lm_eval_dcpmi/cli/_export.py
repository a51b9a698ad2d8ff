"""``dcpmi export RESULTS... --format FMT --out DIR``: results in a leaderboard's format,
after every check of ``dcpmi verify`` (``lm_eval_dcpmi.verification``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_dcpmi.cli._subcommand import SubCommand
from lm_eval_dcpmi.errors import DCPMIError, printable

EXPORT_DESCRIPTION = """\
Writes lm-eval results files of DC-PMI tasks (files, or --output_path folders, with the
samples of --log_samples) in a leaderboard's format, after every check of dcpmi verify
(documents and requests rebuilt from the data, every number recomputed): eee (Every Eval
Ever records, with instance-level records), hf (the Hub's .eval_results/<task>.yaml) or
model-index (a model card's front matter). Every metric is exported. Refused, naming the
file: what verify refuses, a model named by a path (give --model_id), a partial run
(--limit, --samples, --shard; --allow-partial marks it instead), a plugin version or domain
premise other than the installed tasks' (--allow-other-version), two runs of one task.
docs/leaderboards.md describes each field."""


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    from lm_eval_dcpmi.export import FORMATS, HEADLINE

    parser.add_argument("results", nargs="+", type=Path, help="results files or folders")
    parser.add_argument("--format", required=True, choices=FORMATS, help="the target")
    parser.add_argument("--out", required=True, type=Path, help="folder to write into")
    parser.add_argument(
        "--headline",
        default=HEADLINE,
        help=f"the metric a Hub entry's value is (default {HEADLINE}); the others go to notes",
    )
    parser.add_argument(
        "--model_id", help="the model's hub id ORG/NAME, when the results name it by a path"
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="export a run that did not score whole splits, marked as partial",
    )
    parser.add_argument(
        "--allow-other-version",
        action="store_true",
        help="export results of another plugin version or domain premise than "
        "the installed tasks', marked as such",
    )
    parser.add_argument(
        "--instances",
        action="store_true",
        help="eee: require instance-level records (refuse without samples)",
    )
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="TASK=HUB_ID",
        help="TASK=HUB_ID[:TASK_ID[:SPLIT]]: the Hub dataset of a task of your own (repeatable)",
    )
    parser.add_argument(
        "--organization",
        default="unknown",
        help="eee: who ran the evaluation (source_organization_name)",
    )
    parser.add_argument(
        "--relationship",
        default="third_party",
        choices=("first_party", "third_party", "collaborative", "other"),
        help="eee: the evaluator's relation to the model (default third_party)",
    )
    parser.add_argument("--source_url", help="where the logs or records are published")
    parser.add_argument(
        "--tokenizer",
        help="the tokenizer that counts acc_avg's tokens, when "
        "the model is not at hand under its recorded name",
    )
    parser.add_argument(
        "--data_dir",
        help="the data folder verify rebuilds the documents from (default: $DCPMI_DATA_DIR)",
    )
    parser.add_argument(
        "--include_path",
        action="append",
        default=[],
        help="a folder of task YAMLs that are not installed (your own tasks, as verify "
        "takes it; repeatable)",
    )


def run_export(args: argparse.Namespace, verify: bool = True) -> int:
    """``dcpmi export``; ``verify``: run verify's checks first (the command always does;
    tests of the formats alone on hand-made results do not)."""
    from lm_eval_dcpmi._identity import check_hub_id
    from lm_eval_dcpmi.export import ExportOptions, export, parse_dataset_option
    from lm_eval_dcpmi.verification import read_submission, refuse_unverified, results_files

    try:
        model_id = check_hub_id(args.model_id) if args.model_id else None
        datasets = dict(parse_dataset_option(value) for value in args.dataset)
        options = ExportOptions(
            format=args.format,
            out=args.out,
            headline=args.headline,
            allow_partial=args.allow_partial,
            allow_other_version=args.allow_other_version,
            instances=True if args.instances else None,
            datasets=datasets,
            organization=args.organization,
            relationship=args.relationship,
            source_url=args.source_url,
            tokenizer=args.tokenizer,
        )
        submissions = [read_submission(p, model_id) for p in results_files(args.results)]
        if verify:
            refuse_unverified(submissions, args.tokenizer, args.data_dir, tuple(args.include_path))
        written = export(submissions, options)
    except DCPMIError as error:
        print(f"dcpmi export: {printable(str(error))}", file=sys.stderr)
        return 2
    for path in written:
        print(printable(f"wrote {path}"))
    partial = [s.path for s in submissions if s.partial_tasks]
    if partial:
        shown = printable(", ".join(map(str, partial)))
        print(f"dcpmi export: marked as partial: {shown}", file=sys.stderr)
    return 0


class Export(SubCommand):
    name = "export"
    help = "results in a leaderboard's format (Every Eval Ever, the Hub, model cards)"
    description = EXPORT_DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_export_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return run_export(args)
