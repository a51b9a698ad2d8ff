"""lm-eval's command line, for ``dcpmi run``: its parser, its ``EvaluatorConfig`` and its
entry point. lm-eval has no public function that parses a command line without running it.
"""

from __future__ import annotations

import argparse
from typing import Any


def harness_parser() -> Any:
    """lm-eval's own command-line parser, whose ``parse_args()`` reads ``sys.argv`` as
    ``lm_eval`` does.

    0.4: ``lm_eval._cli.HarnessCLI()``, as ``lm_eval.__main__.cli_evaluate`` builds it
    (``parser = HarnessCLI(); args = parser.parse_args()``).
    """
    from lm_eval._cli import HarnessCLI

    return HarnessCLI()


def evaluator_config(namespace: argparse.Namespace) -> Any:
    """lm-eval's ``EvaluatorConfig`` of a parsed command line, as ``lm_eval run`` builds it
    (defaults, ``--config`` YAML, metadata merged with the model arguments).

    0.4: ``lm_eval.config.evaluate_config.EvaluatorConfig.from_cli(namespace)``.
    """
    from lm_eval.config.evaluate_config import EvaluatorConfig

    return EvaluatorConfig.from_cli(namespace)


def cli_evaluate() -> None:
    """lm-eval's command line on ``sys.argv`` (0.4: ``lm_eval.__main__.cli_evaluate()``)."""
    from lm_eval.__main__ import cli_evaluate as lm_evals

    lm_evals()
