"""Reading and writing JSON, in one place: bad JSON named by file, line and column
(``parse_json``), and lm-eval's results files read (``read_json``, a ``DCPMIError`` naming
the file) and written whole (``write_json``, replaced atomically, as lm-eval writes them).

Files read from outside are read only when they are regular files (``open_regular``: a FIFO
named ``results_*.json`` would block a reader forever), and a name read from such a file
is checked before it becomes part of a path (``checked_name``: no separator, NUL, ``.`` or
``..``), by every command that writes or looks up files by such names.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from lm_eval_dcpmi.errors import DCPMIError

# What a results file that is no JSON is told (by the report and the leaderboard commands).
RESULTS_FILE_FIX = "an lm-eval results file (results_<date>.json) is one JSON object."


def json_problem(where: str, error: json.JSONDecodeError, line: int | None = None) -> str:
    """The one wording of bad JSON: ``<where>:<line>: not valid JSON at column <c> (<what>)``;
    ``line`` for one line of a JSON Lines file (the error counts within the line), and no
    line at all where ``where`` is an option's value (``line=0``)."""
    at = error.lineno if line is None else line
    place = f"{where}:{at}" if at else where
    return f"{place}: not valid JSON at column {error.colno} ({error.msg})"


def parse_json(
    text: str,
    where: str,
    *,
    line: int | None = None,
    error: type[DCPMIError] = DCPMIError,
    fix: str = "",
) -> Any:
    """``json.loads(text)``; bad JSON raises ``error`` with ``json_problem``'s wording, then
    ``fix`` (how to mend it), if given."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as problem:
        message = json_problem(where, problem, line)
        raise error(f"{message}; {fix}" if fix else f"{message}.") from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        at = f":{line}" if line else ""
        raise error(
            f"{where}{at}: holds an integer of thousands of digits, more than Python reads; "
            "not a file lm-eval wrote."
        ) from None
    except RecursionError:  # nested deeper than Python's parser goes: no lm-eval file is
        at = f":{line}" if line else ""
        raise error(
            f"{where}{at}: JSON nested too deeply to read (thousands of levels); not a file "
            "lm-eval wrote."
        ) from None


# What a path is, by its mode's type, for the refusal of what is not a regular file.
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def open_regular(path: Path, error: type[DCPMIError] = DCPMIError) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (a link to one
    too); ``error`` naming it otherwise. Opened without blocking, then checked on the open
    file (``fstat``): a FIFO is never waited on, and nothing can swap the file in between."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as problem:
        raise error(f"{path}: cannot be read ({problem.strerror or problem}).") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
        raise error(
            f"{path}: {kind}, not a regular file; only files are read (replace it with the "
            "file lm-eval wrote, or move it away)."
        )
    return os.fdopen(descriptor, "rb")


def read_text(path: Path, error: type[DCPMIError] = DCPMIError) -> str:
    """A regular file's UTF-8 text (``open_regular``); ``error`` naming the file when it
    cannot be read or is not UTF-8 (``UnicodeDecodeError`` passed on for the caller's
    wording)."""
    with open_regular(path, error) as file:
        try:
            data = file.read()
        except OSError as problem:
            raise error(f"{path}: cannot be read ({problem.strerror or problem}).") from None
    return data.decode("utf-8")


def read_json(path: Path) -> dict[str, Any]:
    """A results file's JSON object; a ``DCPMIError`` naming the file otherwise."""
    try:
        text = read_text(path)
    except UnicodeDecodeError:
        raise DCPMIError(f"{path}: not an lm-eval results file (not UTF-8 text).") from None
    data = parse_json(text, str(path), fix=RESULTS_FILE_FIX)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise DCPMIError(f'{path}: not an lm-eval results file (no "results" object).')
    return data


# What no single file's name holds: the path separators (POSIX's, Windows') and NUL.
NOT_IN_A_NAME = ("/", "\\", "\0")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be (part of) one file's name in a folder, or None: a path
    separator or NUL in it, or a folder's own name (``.``, ``..``) or none at all."""
    if name in ("", ".", ".."):
        return f"{name!r} is no file's name" if name else "it is empty"
    bad = next((c for c in NOT_IN_A_NAME if c in name), None)
    return None if bad is None else f"it holds {bad!r}"


def checked_name(name: Any, where: str, what: str, error: type[DCPMIError] = DCPMIError) -> str:
    """``name``, read from a file, about to become part of a path (a folder or file name):
    a text that names one file, else ``error`` naming ``where`` and ``what`` it is, so that
    no name read from a file leads out of the folder it is written or looked up in."""
    problem = name_problem(name) if isinstance(name, str) else f"{type(name).__name__}, not text"
    if problem is not None:
        raise error(
            f"{where}: {what} {name!r} cannot name a file ({problem}); no run of lm-eval "
            "writes such a name: the file is edited or forged (name it with letters, digits, "
            "'_', '-' and '.')."
        )
    return name


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` as lm-eval writes a results file (indent 2, UTF-8), replacing ``path`` whole."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 600; a file written in place would get 666 less the umask
        os.chmod(temporary, 0o666 & ~current_umask())
        # a lone surrogate read from a JSON escape (\\ud800) is written back as that escape
        with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    """The process's umask (read by setting it, then setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
