"""What lm-eval saved for this ``dcpmi run``: its own results file, and whether it is whole.

lm-eval's ``EvaluationTracker`` names the results file after the time it saves it
(``results_<date_id>.json``, the samples files ``samples_<task>_<date_id>.jsonl``) and,
when saving fails (a full disk, a folder it cannot write), only logs a warning ("Could not
save results aggregated", "Could not save sample results") and goes on: the run would end
with exit status 0 and a missing or cut file. ``watched`` notes, for the tracker of this
run alone, the files its two save methods were to write, and checks them after each call;
so two runs into one ``--output_path`` each find their own file, never "the newest".

A file lm-eval left cut is renamed ``<name>.incomplete`` (kept, so nothing is lost, and no
longer named like a file ``dcpmi report`` reads); ``SavedFiles.check`` then raises one
``DCPMIError`` naming it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.errors import DCPMIError

INCOMPLETE_SUFFIX = ".incomplete"
# The logger of lm-eval's EvaluationTracker: its warning, then the exception's repr at INFO.
TRACKER_LOGGER = "lm_eval.loggers.evaluation_tracker"


@dataclass
class SavedFiles:
    """The files lm-eval wrote for this run (first process only), and what failed."""

    results: Path | None = None  # the results file, when whole
    samples: dict[str, Path] = field(default_factory=dict)  # task -> its whole samples file
    failures: list[str] = field(default_factory=list)  # what could not be saved, and why
    _reasons: list[str] = field(default_factory=list)  # lm-eval's logged exceptions

    def check(self) -> None:
        """A ``DCPMIError`` when lm-eval could not save the results or a samples file."""
        if self.failures:
            raise DCPMIError(
                "lm-eval could not save "
                + "; nor ".join(self.failures)
                + ". The scores above are not saved whole: free some space, or give an "
                "--output_path in a folder that can be written, and run again (with "
                "--use_cache PATH a rerun scores only the requests not cached yet)."
            )

    def _failed(self, what: str, path: Path | None, expected: str, logged: int) -> None:
        """Note a failed save; ``logged``: how many reasons were known before it."""
        reason = f" ({self._reasons[-1]})" if len(self._reasons) > logged else ""
        if path is not None and path.exists():
            marked = path.with_name(path.name + INCOMPLETE_SUFFIX)
            try:
                path.replace(marked)
                kept = f"; the cut file is kept as {marked}"
            except OSError:
                kept = f"; {path} is cut"
            self.failures.append(f"{what}{reason}: {path} holds {expected}{kept}")
        else:
            where = f" {path}" if path is not None else ""
            self.failures.append(f"{what}{where}{reason}")


def results_path(tracker: Any) -> Path | None:
    """The results file lm-eval's ``save_results_aggregated`` writes for ``tracker``'s last
    save (lm_eval/loggers/evaluation_tracker.py: a ``.json`` path gets
    ``<stem>_<date_id>.json`` beside it, any other path ``<model>/results_<date_id>.json``);
    None before it named one."""
    date_id = getattr(tracker, "date_id", None)
    if not tracker.output_path or date_id is None:
        return None
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        return path.with_name(f"{path.stem}_{date_id}.json")
    model = str(tracker.general_config_tracker.model_name_sanitized)
    return path / model / f"results_{date_id}.json"


def samples_path(tracker: Any, task_name: str) -> Path | None:
    """The samples file ``save_results_samples`` writes for ``task_name`` (same module)."""
    date_id = getattr(tracker, "date_id", None)
    if not tracker.output_path or date_id is None:
        return None
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        folder = path.parent
    else:
        folder = path / str(tracker.general_config_tracker.model_name_sanitized)
    return folder / f"samples_{task_name}_{date_id}.jsonl"


def _whole_json(path: Path) -> bool:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def _line_count(path: Path) -> int | None:
    """Complete lines in ``path`` (None: unreadable, or its last line is cut)."""
    count, last = 0, b"\n"
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                count += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    return count if last == b"\n" else None


class _Reasons(logging.Handler):
    """Keeps the exceptions lm-eval's tracker logs after "Could not save ..." (its INFO
    record holds their ``repr``)."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into
        self._after_warning = False

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING and message.startswith("Could not save"):
            self._after_warning = True
        elif self._after_warning:
            self._after_warning = False
            self.into.append(message)


@contextlib.contextmanager
def watched() -> Iterator[SavedFiles]:
    """Within the block, every ``EvaluationTracker``'s saves are checked and noted."""
    from lm_eval_dcpmi._harness import evaluation_tracker_class

    tracker_class = evaluation_tracker_class()
    save_aggregated = tracker_class.save_results_aggregated
    save_samples = tracker_class.save_results_samples
    saved = SavedFiles()

    def aggregated(self: Any, *args: Any, **kwargs: Any) -> Any:
        before, logged = getattr(self, "date_id", None), len(saved._reasons)
        outcome = save_aggregated(self, *args, **kwargs)
        if self.output_path:
            path = results_path(self) if getattr(self, "date_id", None) != before else None
            if path is not None and _whole_json(path):
                saved.results = path
            else:
                saved._failed("the results", path, "no whole JSON", logged)
        return outcome

    def samples(self: Any, task_name: str, samples: Any, *args: Any, **kwargs: Any) -> Any:
        expected, logged = len(samples), len(saved._reasons)
        outcome = save_samples(self, task_name, samples, *args, **kwargs)
        if self.output_path:
            path = samples_path(self, task_name)
            lines = _line_count(path) if path is not None else None
            if path is not None and lines == expected:
                saved.samples[task_name] = path
            else:
                shown = "a cut last line" if lines is None else f"{lines} lines"
                saved._failed(
                    f"the samples of {task_name}", path, f"{shown} of {expected} documents", logged
                )
        return outcome

    logger = logging.getLogger(TRACKER_LOGGER)
    handler = _Reasons(saved._reasons)
    logger.addHandler(handler)
    tracker_class.save_results_aggregated = aggregated  # type: ignore[method-assign]
    tracker_class.save_results_samples = samples  # type: ignore[method-assign]
    try:
        yield saved
    finally:
        tracker_class.save_results_aggregated = save_aggregated  # type: ignore[method-assign]
        tracker_class.save_results_samples = save_samples  # type: ignore[method-assign]
        logger.removeHandler(handler)
