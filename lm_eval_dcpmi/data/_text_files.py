"""Reading the plugin's data files as text: errors that name the file, line and byte.

A data file that is not UTF-8 (or a folder, or unreadable) would otherwise end in a long
``UnicodeDecodeError`` or ``IsADirectoryError`` traceback that names no file.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from lm_eval_dcpmi._json_files import json_problem
from lm_eval_dcpmi.errors import DataError

# Byte-order marks of the encodings that are not UTF-8 (UTF-32 first: its little-endian
# mark begins with UTF-16's).
BYTE_ORDER_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def not_utf8_message(path: Path, name: str) -> str:
    """Where ``path`` (shown as ``name``) first stops being UTF-8: line and byte offset;
    or, for a file that starts with a UTF-16 or UTF-32 byte-order mark, its encoding."""
    raw = path.read_bytes()
    for mark, encoding in BYTE_ORDER_MARKS:
        if raw.startswith(mark):
            return (
                f"{name}: {encoding} text (its byte-order mark says so), not UTF-8 ({path}); "
                f"convert it with `iconv -f {encoding} -t UTF-8` (the byte-order mark goes "
                "with it)."
            )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        where = f"{name}:{line}: not UTF-8 text (byte 0x{raw[err.start]:02x} at byte offset "
        where += f"{err.start} of {path})"
    else:
        where = f"{name}: not UTF-8 text ({path})"
    return (
        f"{where}; convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or fetch the "
        "original file again."
    )


@contextlib.contextmanager
def reading(path: Path, name: str) -> Iterator[None]:
    """Errors of reading ``path`` as text become a ``DataError`` naming ``name``."""
    try:
        yield
    except UnicodeDecodeError:
        raise DataError(not_utf8_message(path, name)) from None
    except OSError as err:
        raise DataError(f"{name}: cannot be read ({err.strerror or err}).") from None


def json_file_problem(path: Path, name: str, *, document: bool = False) -> str | None:
    """What keeps ``path`` from being read as JSON Lines, or as one JSON document (an array,
    or with ``document``, as the datasets library reads a file under ``field``): not UTF-8,
    empty, the first line that is not a JSON object; None when none of these."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        return f"{name}: cannot be read ({err.strerror or err})."
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return not_utf8_message(path, name)
    if not text.strip():
        return f"{name}: the file is empty ({path}); it needs one JSON object per line."
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        whole_error = err
    else:
        return None  # one JSON document
    if document or text.lstrip().startswith("["):
        return f"{json_problem(name, whole_error)}."
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            # a JSON document over several lines fails at its first line: the error that
            # came further into the file is the one to fix
            if (whole_error.lineno, whole_error.colno) > (number, err.colno):
                return f"{json_problem(name, whole_error)}."
            return f"{json_problem(name, err, number)}."
        if not isinstance(row, dict):
            return f"{name}:{number}: expected a JSON object per line, not {json.dumps(row)[:40]}."
    return None


def is_utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def declares_utf8(path: Path) -> bool:
    """An XML file read as UTF-8: no declared encoding, or UTF-8 declared."""
    with open(path, "rb") as handle:
        head = handle.read(200)
    declared = re.match(rb"""(?:\xef\xbb\xbf)?<\?xml[^>]*encoding=["']([A-Za-z0-9._-]+)""", head)
    return declared is None or declared.group(1).lower() in (b"utf-8", b"utf8")
