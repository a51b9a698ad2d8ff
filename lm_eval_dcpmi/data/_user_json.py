"""A user's task on ``dataset_path: json``: a data file the datasets library cannot read
is named, with its line, in one error (``loading_json``), not a library traceback."""

from __future__ import annotations

import contextlib
import glob
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.data._text_files import is_utf8, json_file_problem, not_utf8_message
from lm_eval_dcpmi.errors import DCPMIConfigError, DCPMIError, cause_of


def _data_files(dataset_kwargs: dict[str, Any] | None) -> list[tuple[str, Path]]:
    """(name as the YAML writes it, path) of the local files in ``data_files``: a path, a
    list of them or a split -> path(s) mapping; glob patterns expanded, URLs left out."""
    files = (dataset_kwargs or {}).get("data_files")
    if files is None:
        return []
    if isinstance(files, dict):
        files = list(files.values())
    if not isinstance(files, (list, tuple)):
        files = [files]
    names = [str(f) for group in files for f in (group if isinstance(group, list) else [group])]
    found = []
    for name in names:
        if "://" in name:
            continue
        if glob.has_magic(name):
            found += [(match, Path(match)) for match in sorted(glob.glob(name, recursive=True))]
        else:
            found.append((name, Path(name)))
    return found


def _json_file_problem(dataset_kwargs: dict[str, Any] | None) -> str | None:
    document = "field" in (dataset_kwargs or {})
    for name, path in _data_files(dataset_kwargs):
        if not path.exists():
            return (
                f"{name}: no such file ({path.absolute()}); fix the path (a relative one is "
                "read from the folder the run starts in)."
            )
        if path.is_dir():
            return f"{name}: a folder ({path.absolute()}); name the JSON file itself."
        problem = json_file_problem(path, name, document=document)
        if problem is not None:
            return problem
    return None


@contextlib.contextmanager
def loading_json(task: str, source: str, config: Any) -> Iterator[None]:
    """A task's ``dataset_path: json`` data loaded by the datasets library: a file it cannot
    read (broken JSON, empty, not UTF-8, missing) ends in one error naming the file and
    line, not the library's traceback; and since the library takes bytes that are not
    UTF-8 without a word (reading the record fails later), that is checked too."""
    if config.dataset_path != "json" or callable(config.custom_dataset):
        yield
        return
    where = f"task {task} ({source}): dataset_kwargs.data_files"
    try:
        yield
    except DCPMIError:
        raise
    except Exception as err:
        recursion = cause_of(err, RecursionError)
        if recursion is not None:  # the stack ran out (a group that holds itself): no file's
            raise recursion from None  # fault; the caller names the group
        problem = _json_file_problem(config.dataset_kwargs)
        if problem is None:
            reason = err.__cause__ or err
            names = ", ".join(name for name, _path in _data_files(config.dataset_kwargs))
            problem = (
                f"the datasets library cannot read {names or 'the data'} "
                f"({type(reason).__name__}: {reason}); a JSON data file holds one JSON object "
                "per line, or one JSON document."
            )
        raise DCPMIConfigError(f"{where}: {problem}") from err
    for name, path in _data_files(config.dataset_kwargs):
        if path.is_file() and not is_utf8(path):
            raise DCPMIConfigError(f"{where}: {not_utf8_message(path, name)}")
