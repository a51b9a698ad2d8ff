"""Reading and writing JSON, in one place: bad JSON named by file, line and column
(``parse_json``), and lm-eval's results files read (``read_json``, a ``DCPMIError`` naming
the file) and written whole (``write_json``, replaced atomically, as lm-eval writes them).

Files read from outside are read only when they are regular files (``open_regular``: a FIFO
named ``results_*.json`` would block a reader forever), within stated sizes
(``MAX_RESULTS_BYTES`` a results file; ``MAX_LINES_BYTES``, ``MAX_LINE_BYTES`` and
``MAX_LINES`` a JSON Lines file uncompressed, read as a stream: ``json_lines``), and as JSON
whose objects hold each key once (``parse_json``: Python keeps the last copy of a repeated
key, another reader the first, so such a file says two things). A name read from such a
file is checked before it becomes part of a path (``checked_name``: no separator, NUL, ``.``
or ``..``), by every command that writes or looks up files by such names.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterator
from json.decoder import scanstring
from pathlib import Path
from typing import Any, BinaryIO

from lm_eval_dcpmi.errors import DCPMIError

# What a results file that is no JSON is told (by the report and the leaderboard commands).
RESULTS_FILE_FIX = "an lm-eval results file (results_<date>.json) is one JSON object."

# The most read of one file from outside, far above any run's (the 16 paper tasks' whole
# splits: a results file of ~0.1 MB; HellaSwag's full samples, the largest, ~60 MB with a few
# kB a line), so that a forged file (a gzip of gigabytes of spaces) is refused, not read into
# memory. docs/leaderboards.md states them.
MAX_RESULTS_BYTES = 64 * 2**20
MAX_LINES_BYTES = 2 * 2**30  # a samples file (or any JSON Lines file), uncompressed
MAX_LINE_BYTES = 64 * 2**20  # one line of it
MAX_LINES = 10_000_000  # lines of it (blank ones too): a run writes one a document


class _RepeatedKey(Exception):  # not a ValueError: parse_json tells those apart
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        raise _RepeatedKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return data


_SYNTAX = re.compile(r'["{}\[\],]')


def _repeated_key_line(text: str, key: str) -> int | None:
    """The line (1-based) of the second ``key`` in one object of ``text``, JSON already
    read once (the error path only: a character scan, not the C parser)."""
    objects: list[set[str] | None] = []  # per open container: its keys; None for a list
    expecting_key = False
    at = 0
    try:
        while match := _SYNTAX.search(text, at):
            at, mark = match.end(), match.group()
            if mark == '"':
                value, at = scanstring(text, at)
                keys = objects[-1] if objects else None
                if expecting_key and keys is not None:
                    if value == key and value in keys:
                        return text.count("\n", 0, match.start()) + 1
                    keys.add(value)
                    expecting_key = False
            elif mark in "{[":
                objects.append(set() if mark == "{" else None)
                expecting_key = mark == "{"
            elif mark in "}]":
                objects.pop()
            else:  # a comma: a key follows in an object
                expecting_key = bool(objects) and objects[-1] is not None
    except (ValueError, IndexError):
        return None
    return None


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
    ``fix`` (how to mend it), if given, and so does an object holding one key twice, naming
    the key and its line."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKey as repeated:
        at = line if line is not None else _repeated_key_line(text, repeated.key)
        place = f"{where}:{at}" if at else where
        raise error(
            f"{place}: the key {repeated.key!r} appears a second time in one object; readers "
            "differ on which copy counts (Python keeps the last, others the first), so the "
            "file is refused: no lm-eval run writes a key twice (use the file as the run "
            "wrote it)."
        ) from None
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


def read_text(path: Path, error: type[DCPMIError] = DCPMIError, limit: int | None = None) -> str:
    """A regular file's UTF-8 text (``open_regular``) of at most ``limit`` bytes (default
    ``MAX_RESULTS_BYTES``); ``error`` naming the file when it cannot be read, is larger, or
    is not UTF-8 (``UnicodeDecodeError`` passed on for the caller's wording)."""
    limit = MAX_RESULTS_BYTES if limit is None else limit
    with open_regular(path, error) as file:
        try:
            data = file.read(limit + 1)
        except OSError as problem:
            raise error(f"{path}: cannot be read ({problem.strerror or problem}).") from None
    if len(data) > limit:
        raise error(f"{path}: {_over(limit)}")
    return data.decode("utf-8")


def _over(limit: int) -> str:
    return (
        f"larger than the {_size(limit)} read of one file from outside (far above any "
        "lm-eval run's); not read. A forged or padded file: use the file the run wrote."
    )


def _size(limit: int) -> str:
    return f"{limit // 2**20:,} MiB" if limit % 2**20 == 0 else f"{limit:,} bytes"


def json_lines(
    path: Path, error: type[DCPMIError] = DCPMIError, what: str = "a JSON Lines file"
) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a JSON Lines file, gzipped when its name ends in ``.gz``,
    read as a stream: a line over ``MAX_LINE_BYTES``, a file over ``MAX_LINES_BYTES``
    (uncompressed) or over ``MAX_LINES`` lines is refused with ``error`` naming the file
    (and line), as is a file that cannot be read or decompressed (as ``what``). Lines end at
    ``\\n`` only (``str.splitlines`` would also split at U+0085 and U+2028, which lm-eval
    writes unescaped in a document's text)."""
    total = 0
    with open_regular(path, error) as raw:  # a FIFO is refused, not waited on
        stream: BinaryIO = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw  # type: ignore[assignment]
        number = 0
        while True:
            try:
                line = stream.readline(MAX_LINE_BYTES + 1)
            except (OSError, EOFError, zlib.error) as problem:
                raise error(f"{path}: cannot be read as {what} ({problem}).") from None
            if not line:
                return
            number += 1
            total += len(line)
            if len(line) > MAX_LINE_BYTES:
                raise error(
                    f"{path}:{number}: a line longer than {_size(MAX_LINE_BYTES)} (far "
                    "above any lm-eval sample's); not read. A forged or padded file: use the "
                    "file the run wrote."
                )
            if total > MAX_LINES_BYTES:
                raise error(f"{path}: uncompressed, {_over(MAX_LINES_BYTES)}")
            if number > MAX_LINES:
                raise error(
                    f"{path}: more than {MAX_LINES:,} lines (a run writes one a document, "
                    "and no split has that many); not read. A forged or padded file: use the "
                    "file the run wrote."
                )
            yield number, line


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
