"""Reading and writing JSON, in one place: bad JSON named by file, line and column
(``parse_json``), and lm-eval's results files read (``read_json``, a ``DCPMIError`` naming
the file) and written whole (``write_json``, replaced atomically, as lm-eval writes them).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

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


def read_json(path: Path) -> dict[str, Any]:
    """A results file's JSON object; a ``DCPMIError`` naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DCPMIError(f"{path}: cannot be read ({error.strerror or error}).") from None
    except UnicodeDecodeError:
        raise DCPMIError(f"{path}: not an lm-eval results file (not UTF-8 text).") from None
    data = parse_json(text, str(path), fix=RESULTS_FILE_FIX)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise DCPMIError(f'{path}: not an lm-eval results file (no "results" object).')
    return data


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
