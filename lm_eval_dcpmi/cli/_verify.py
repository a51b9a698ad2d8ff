"""``dcpmi verify RESULTS... [--rescore N]``: every document and request of results files
rebuilt from the data, every number recomputed (``lm_eval_dcpmi.verification._verify``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_dcpmi.cli._subcommand import SubCommand
from lm_eval_dcpmi.errors import DCPMIError, printable

VERIFY_DESCRIPTION = """\
Trusts nothing a results file says that can be rebuilt. For each DC-PMI task of lm-eval
results files (a run with --log_samples), it builds the task's documents and requests again
from the data files at hand (DCPMI_DATA_DIR, or --data_dir) and the installed task, and
compares them with the samples: every request, target and hash, the documents logged
against the split and the recorded counts, the data files' sha256. Then it recomputes every
accuracy, standard error and group mean from the logged loglikelihoods, and refuses values
out of range, a dummy model's run and an embedded model file other than the installed one.
Exit status 0: everything agrees; 1: a difference (each printed, naming the file, task and
what differs); 2: the files cannot be read."""


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    from lm_eval_dcpmi.verification import DEFAULT_TOLERANCE

    parser.add_argument("results", nargs="+", type=Path, help="results files or folders")
    parser.add_argument(
        "--data_dir",
        help="the data folder to check the digests against "
        "(default: $DCPMI_DATA_DIR, else the downloaded files)",
    )
    parser.add_argument(
        "--tokenizer",
        help="the tokenizer that counts acc_avg's tokens, when "
        "the model is not at hand under its recorded name",
    )
    parser.add_argument(
        "--include_path",
        action="append",
        default=[],
        help="a folder of task YAMLs that are not installed (your own tasks; repeatable)",
    )
    rescoring = parser.add_argument_group(
        "rescoring", "score documents again with the model the results name (--rescore)"
    )
    rescoring.add_argument(
        "--rescore",
        metavar="N",
        help="score N documents of each task again (all: every one) and compare each "
        "request's loglikelihood with the logged one",
    )
    rescoring.add_argument(
        "--seed",
        type=int,
        help="the seed the documents are drawn with (default: a new one, printed)",
    )
    rescoring.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"largest |loglikelihood difference| accepted (default {DEFAULT_TOLERANCE:g})",
    )
    rescoring.add_argument("--model", help="lm-eval's model to score with (default: the run's)")
    rescoring.add_argument(
        "--model_args", help="its arguments, a=b,c=d (default: the model the results name)"
    )
    rescoring.add_argument("--device", help="e.g. cuda:0 (default cpu)")
    rescoring.add_argument("--batch_size", type=int, default=8)


def run_verify(args: argparse.Namespace) -> int:
    import secrets

    from lm_eval_dcpmi.verification import (
        RescoreOptions,
        VerifyOptions,
        check_tolerance,
        parse_count,
        verify,
        verify_summary,
    )

    try:
        rescore = None
        if args.rescore is not None:
            seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
            rescore = RescoreOptions(
                parse_count(args.rescore), seed, check_tolerance(args.tolerance), args.model,
                args.model_args, args.device, args.batch_size,
            )  # fmt: skip
        options = VerifyOptions(
            args.tokenizer, args.data_dir, tuple(args.include_path), True, rescore
        )
        checked, findings = verify(args.results, options)
    except DCPMIError as error:
        print(f"dcpmi verify: {printable(str(error))}", file=sys.stderr)
        return 2
    for line in verify_summary(checked):
        print(printable(line))
    for result in checked:
        for note in result.notes:
            print(f"note: {printable(note)}")
        for line in result.rescored:
            print(printable(line))
    if findings:
        for finding in findings:
            print(f"dcpmi verify: {printable(str(finding))}", file=sys.stderr)
        print(f"dcpmi verify: FAILED, {len(findings)} difference(s).", file=sys.stderr)
        return 1
    files = len(checked)
    tasks = sum(len(c.tasks) for c in checked)
    rescored = " and the drawn documents rescored within the tolerance" if args.rescore else ""
    print(
        f"verified: {files} results file(s), {tasks} task(s); every document and request "
        f"rebuilt from the data, every number recomputes{rescored}."
    )
    return 0


class Verify(SubCommand):
    name = "verify"
    help = "recompute every number of results files from their logged samples"
    description = VERIFY_DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_verify_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return run_verify(args)
