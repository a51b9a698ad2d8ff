"""Writing a report's files all or nothing.

Every target is checked first (a folder where a file goes, a file where the ``--out``
folder goes); each file is then written under a temporary name beside its target and only
moved into place (``os.replace``, atomic on one file system) once all were written. A
failure leaves the targets as they were and removes the temporary files, and the ``--out``
folder when this call created it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.report.results import ReportError


@dataclass(frozen=True)
class Output:
    """A file to write: ``write(path)`` writes its content to ``path`` (a temporary name)."""

    target: Path
    write: Callable[[Path], Any]


def text_output(target: Path, text: str) -> Output:
    return Output(target, lambda path: path.write_text(text, encoding="utf-8"))


def _check(outputs: Sequence[Output], folder: Path | None) -> None:
    if folder is not None and folder.exists() and not folder.is_dir():
        raise ReportError(f"--out {folder} is a file; give a folder (nothing was written)")
    for output in outputs:
        if output.target.is_dir():
            raise ReportError(
                f"{output.target} is a folder; remove or rename it, or write elsewhere "
                "(nothing was written)"
            )


def _missing_ancestor(folder: Path) -> Path | None:
    """The outermost folder of ``folder``'s path that does not exist yet (None: all do)."""
    missing = None
    for candidate in [folder, *folder.parents]:
        if candidate.exists():
            break
        missing = candidate
    return missing


def _remove_created(folder: Path, created: Path) -> None:
    """Remove the empty folders from ``folder`` up to ``created``, which this call made."""
    current = folder
    while True:
        try:
            current.rmdir()
        except OSError:
            return
        if current == created:
            return
        current = current.parent


def write_all(outputs: Sequence[Output], folder: Path | None = None) -> list[Path]:
    """Write ``outputs`` all or nothing (see the module's docstring), creating ``folder``
    first if given; returns the targets."""
    _check(outputs, folder)
    created = _missing_ancestor(folder) if folder is not None else None
    temporary: list[tuple[Path, Path]] = []
    try:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        for output in outputs:
            output.target.parent.mkdir(parents=True, exist_ok=True)
            path = output.target.with_name(f".{output.target.name}.{os.getpid()}.tmp")
            temporary.append((path, output.target))
            try:
                output.write(path)
            except OSError as err:
                raise ReportError(
                    f"{output.target}: cannot be written ({err.strerror or err}); nothing was "
                    "written"
                ) from None
        for path, target in temporary:
            os.replace(path, target)
    except BaseException:
        for path, _target in temporary:
            path.unlink(missing_ok=True)
        if folder is not None and created is not None:
            _remove_created(folder, created)
        raise
    return [output.target for output in outputs]
