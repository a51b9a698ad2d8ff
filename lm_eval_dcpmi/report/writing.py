"""Writing a report's files all or nothing.

Every target is checked first (a folder where a file goes, a file where the ``--out``
folder goes); each file is then written under a temporary name beside its target and only
moved into place (``os.replace``, atomic on one file system) once all were written. Each
target that exists is first kept under a second name (a hard link, else a copy), so that
when moving a later file into place fails (a target made immutable, a full disk) the
files already replaced are put back and the new ones removed. A failure leaves the
targets as they were and removes the temporary files, and the ``--out`` folder when this
call created it.
"""

from __future__ import annotations

import os
import shutil
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
    """``text`` as UTF-8; a character UTF-8 cannot hold (a file name's undecodable byte,
    which Python keeps as a lone surrogate) is written as its escape, ``\\udce9``."""
    return Output(
        target, lambda path: path.write_text(text, encoding="utf-8", errors="backslashreplace")
    )


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
            _make_folder(folder)
        for output in outputs:
            _make_folder(output.target.parent)
            path = output.target.with_name(f".{output.target.name}.{os.getpid()}.tmp")
            temporary.append((path, output.target))
            try:
                output.write(path)
            except OSError as err:
                raise ReportError(
                    f"{output.target}: cannot be written ({err.strerror or err}); nothing was "
                    "written"
                ) from None
        _move_into_place(temporary)
    except BaseException:
        for path, _target in temporary:
            path.unlink(missing_ok=True)
        if folder is not None and created is not None:
            _remove_created(folder, created)
        raise
    return [output.target for output in outputs]


def _make_folder(folder: Path) -> None:
    """``folder`` and its parents made; a folder that cannot be made (a read-only file
    system, no permission, a file in the way) is one ``ReportError`` naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ReportError(
            f"{err.filename or folder}: cannot be created ({err.strerror or err}); give a "
            "folder that can be written (nothing was written)"
        ) from None


def _keep(target: Path) -> Path | None:
    """A second name for ``target``'s current content (None: there is no target)."""
    if not target.exists():
        return None
    kept = target.with_name(f".{target.name}.{os.getpid()}.old")
    kept.unlink(missing_ok=True)
    try:
        os.link(target, kept)
    except OSError:  # no hard links here: a copy
        shutil.copy2(target, kept)
    return kept


def _move_into_place(temporary: Sequence[tuple[Path, Path]]) -> None:
    """``os.replace`` each temporary file onto its target; if one fails, undo the ones
    done (the previous files back, the new ones removed) and raise ``ReportError``."""
    done: list[tuple[Path, Path | None]] = []  # (target, its previous content's second name)
    kept_all: list[Path] = []
    unrestored: list[tuple[Path, Path | None]] = []
    try:
        for path, target in temporary:
            try:
                kept = _keep(target)
                if kept is not None:
                    kept_all.append(kept)
                done.append((target, kept))  # before the move: undone even if it is cut off
                os.replace(path, target)
            except OSError as err:
                unrestored = _undo(done)
                raise ReportError(
                    f"{target}: cannot be moved into place ({err.strerror or err}); "
                    + _undone(unrestored)
                ) from None
    except ReportError:
        raise
    except BaseException:  # Ctrl-C or SIGTERM while moving: every file back as it was
        unrestored = _undo(done)
        raise
    finally:
        keep = {k for _t, k in unrestored}
        for kept in kept_all:
            if kept not in keep:
                kept.unlink(missing_ok=True)


def _undone(unrestored: Sequence[tuple[Path, Path | None]]) -> str:
    if not unrestored:
        return "nothing was written (the files already replaced were restored)"
    return "; ".join(
        f"{target} holds the new version and could not be restored"
        + (f" (the previous one is {kept})" if kept is not None else "")
        for target, kept in unrestored
    )


def _undo(done: Sequence[tuple[Path, Path | None]]) -> list[tuple[Path, Path | None]]:
    """Put back what ``_move_into_place`` replaced; returns those it could not."""
    failed = []
    for target, kept in reversed(done):
        try:
            if kept is None:
                target.unlink(missing_ok=True)
            else:
                os.replace(kept, target)
        except OSError:
            failed.append((target, kept))
    return failed
