"""``dcpmi export`` and ``dcpmi verify``: their options and what they print."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.leaderboard.rescore import DEFAULT_TOLERANCE

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


MERGE_DESCRIPTION = """\
Joins the shards of one run (the --output_path folders of `dcpmi run --shard K/N
--log_samples`, K = 1..N) into that run: one results file and one samples file per task
under --out, which verify, report and export read as if from one run. Refused, in one line
naming the shard: shards of other commits, models, lm-eval versions, task configs or
premises; two of the same K; a missing K (unless --allow-partial, which marks the result
partial); a shard without its samples, or whose samples are not its share of the split or
hold per-document values their loglikelihoods do not give. CC is decided with document 0's
content-free scores and BC over every document, as in one run."""


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


def run_merge(args: argparse.Namespace) -> int:
    from lm_eval_dcpmi.leaderboard.merge import merge

    try:
        written = merge(args.shards, args.out, args.allow_partial)
    except DCPMIError as error:
        print(f"dcpmi merge: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    from lm_eval_dcpmi.leaderboard.export import FORMATS, HEADLINE

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


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
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


def refuse_unverified(submissions: list, tokenizer: str | None, data_dir: str | None) -> None:
    """``dcpmi verify``'s every check on each submission first: export writes only numbers
    that the data and the logged loglikelihoods give (a ``DCPMIError`` naming the first
    difference otherwise)."""
    from lm_eval_dcpmi.leaderboard.verify import VerifyOptions, verify_submission

    if data_dir is not None and not Path(data_dir).is_dir():
        raise DCPMIError(
            f"--data_dir {data_dir}: no such folder; give the evaluation data's folder."
        )
    options = VerifyOptions(tokenizer, data_dir)
    for submission in submissions:
        _checked, findings = verify_submission(submission, options)
        if findings:
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            raise DCPMIError(
                f"{findings[0]}{more}; export writes only what dcpmi verify passes (it lists "
                "every difference)."
            )


def run_export(args: argparse.Namespace, verify: bool = True) -> int:
    """``dcpmi export``; ``verify``: run verify's checks first (the command always does;
    tests of the formats alone on hand-made results do not)."""
    from lm_eval_dcpmi.leaderboard.benchmarks import parse_dataset_option
    from lm_eval_dcpmi.leaderboard.export import ExportOptions, export
    from lm_eval_dcpmi.leaderboard.identity import check_hub_id
    from lm_eval_dcpmi.leaderboard.submission import read_submission, results_files

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
            refuse_unverified(submissions, args.tokenizer, args.data_dir)
        written = export(submissions, options)
    except DCPMIError as error:
        print(f"dcpmi export: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    partial = [s.path for s in submissions if s.partial_tasks]
    if partial:
        print(f"dcpmi export: marked as partial: {', '.join(map(str, partial))}", file=sys.stderr)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    import secrets

    from lm_eval_dcpmi.leaderboard.rescore import RescoreOptions, parse_count
    from lm_eval_dcpmi.leaderboard.verify import VerifyOptions, summary, verify

    try:
        rescore = None
        if args.rescore is not None:
            seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
            rescore = RescoreOptions(
                parse_count(args.rescore), seed, args.tolerance, args.model, args.model_args,
                args.device, args.batch_size,
            )  # fmt: skip
        options = VerifyOptions(
            args.tokenizer, args.data_dir, tuple(args.include_path), True, rescore
        )
        checked, findings = verify(args.results, options)
    except DCPMIError as error:
        print(f"dcpmi verify: {error}", file=sys.stderr)
        return 2
    for line in summary(checked):
        print(line)
    for result in checked:
        for note in result.notes:
            print(f"note: {note}")
        for line in result.rescored:
            print(line)
    if findings:
        for finding in findings:
            print(f"dcpmi verify: {finding}", file=sys.stderr)
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
