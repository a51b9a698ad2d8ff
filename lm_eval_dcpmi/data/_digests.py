"""The sha256 of data files and folders, so that two results can be known to score the same
files (``_task_files`` gives those of the files a task read, which ``DCPMITask`` records in
its metadata and ``dcpmi verify`` checks), and a download can be known to be the upstream
file (``_upstream``).

A file's digest is the sha256 of its bytes. A folder's (RACE's folders of article files) is
the sha256 of its sorted ``<relative path>\\0<file sha256>\\n`` lines: renaming, adding or
changing any file changes it.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path


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
