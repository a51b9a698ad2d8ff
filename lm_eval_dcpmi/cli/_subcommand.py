"""What every ``dcpmi`` subcommand is (lm-eval's ``_cli`` style: one module per subcommand,
each a ``SubCommand``), and the ending they share: a user's error as one line, an
interruption said on a line of its own."""

from __future__ import annotations

import argparse
import sys
from typing import ClassVar

from lm_eval_dcpmi.errors import DCPMIError, cause_of


class SubCommand:
    """A subcommand: its name, one-line help and description, its arguments and its run.
    A ``raw`` one reads its own argv (``dcpmi run`` hands lm-eval's options on as given)."""

    name: ClassVar[str]
    help: ClassVar[str]
    description: ClassVar[str | None] = None
    raw: ClassVar[bool] = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the subcommand's arguments to its parser."""

    def run(self, args: argparse.Namespace) -> int:
        """Run on the parsed arguments; the exit status."""
        raise NotImplementedError

    def run_raw(self, argv: list[str]) -> int:
        """Run on the arguments after the subcommand's name (``raw`` subcommands)."""
        raise NotImplementedError


def user_error(error: BaseException) -> DCPMIError | None:
    """The ``DCPMIError`` that caused ``error`` (itself, or one it was raised from)."""
    cause = cause_of(error, DCPMIError)
    return cause if isinstance(cause, DCPMIError) else None


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
