"""The sha256 of the data a task read, so that two results can be known to score the same
files (``DCPMITask`` records them in its metadata; ``dcpmi verify`` checks them).

A file's digest is the sha256 of its bytes. A folder's (RACE's folders of article files) is
the sha256 of its sorted ``<relative path>\\0<file sha256>\\n`` lines: renaming, adding or
changing any file changes it.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=256)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (remembered while its size and time stay the same)."""
    stat = os.stat(path)
    return _sha256(os.fspath(path), stat.st_size, stat.st_mtime_ns)


def folder_sha256(folder: str | os.PathLike) -> str:
    """The sha256 of a folder's files and their relative paths (see the module's docstring)."""
    root = Path(folder)
    lines = sorted(
        f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}\n"
        for path in root.rglob("*")
        if path.is_file()
    )
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def sha256_of(path: str | os.PathLike) -> str:
    """``folder_sha256`` of a folder, else ``file_sha256``."""
    return folder_sha256(path) if Path(path).is_dir() else file_sha256(path)


def data_file_keys(dataset_kwargs: Mapping[str, Any] | None) -> dict[str, str]:
    """The plugin loaders' data files in a task's ``dataset_kwargs``: ``file`` and every
    ``*_file`` (``fewshot_file``), key -> the file's path in the data folder."""
    return {
        key: value
        for key, value in (dataset_kwargs or {}).items()
        if (key == "file" or key.endswith("_file")) and isinstance(value, str) and value
    }


def task_data_files(config: Any) -> dict[str, str]:
    """``{file: sha256}`` of the data files a task's loader read (``config``: lm-eval's
    ``TaskConfig``): the plugin's loaders' files in its data folder, or a ``json``/``csv``
    task's ``data_files``. Empty for a hub dataset (its id and revision say what it is)."""
    from lm_eval_dcpmi.data._loaders import locate

    kwargs = getattr(config, "dataset_kwargs", None) or {}
    metadata = getattr(config, "metadata", None) or {}
    loader = getattr(config, "custom_dataset", None)
    ours = getattr(loader, "__module__", "").startswith("lm_eval_dcpmi.")
    found = {}
    for file in data_file_keys(kwargs).values() if ours else ():
        path = locate(file, metadata.get("data_dir"), folder=None)
        found[file] = sha256_of(path)
    data_files = kwargs.get("data_files")
    if isinstance(data_files, str):
        data_files = [data_files]
    if isinstance(data_files, Mapping):
        data_files = [f for files in data_files.values() for f in _as_list(files)]
    for file in data_files or []:
        if isinstance(file, str) and Path(file).is_file():
            found[Path(file).name] = file_sha256(file)
    return found


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]
