"""``dcpmi fetch``: every file the dataset folders name, downloaded once and checked, as a
data folder laid out as ``<dataset>/<file>`` that ``DCPMI_DATA_DIR`` can point at.

Each file comes through the tasks' own download (``_loaders``: ``datasets``' download
manager and its cache, from the upstream address or ``DCPMI_DATA_MIRROR``'s server) with
its sha256 checked there (``_upstream``), then is copied into the folder: copies, not links
into the datasets cache, so the folder stays whole when that cache is cleared. A file the
folder already holds with an accepted sha256 is not downloaded again; one it holds with
another sha256 stops the fetch, named, and is left as it is (it may be the user's own).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lm_eval_dcpmi.data import _folders as folders
from lm_eval_dcpmi.data._digests import sha256_of
from lm_eval_dcpmi.data._loaders import _download
from lm_eval_dcpmi.data._upstream import Mirror, known_as
from lm_eval_dcpmi.errors import DataError

NOT_RECORDED = "unchecked: its dataset folder records no sha256"


@dataclass(frozen=True)
class Fetched:
    """One file of the data folder, as ``fetch`` left it."""

    file: str  # its path in the data folder
    address: str | None  # where it was downloaded from; None: the folder already held it
    sha256: str
    what: str  # "the upstream file", or the known copy it is (HellaSwag's rebuilt file)


def default_data_dir() -> Path:
    """Where ``dcpmi fetch`` puts the files unless told: ``lm-eval-dcpmi/data`` in the
    user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "lm-eval-dcpmi" / "data"


def fetch(data_dir: Path, mirror: Mirror | None = None) -> Iterator[Fetched]:
    """Every file the dataset folders name into ``data_dir``, one ``Fetched`` as each is
    done (a download can take minutes); a ``DataError`` naming the first that cannot be."""
    for file, source in folders.upstream_files().items():
        target = data_dir / file
        if target.exists():
            digest = sha256_of(target)
            what = known_as(file, digest)
            if what is None and source.sha256 is not None:
                raise DataError(
                    f"{target}: sha256 {digest}, but task_configs/{file.split('/', 1)[0]}/"
                    f"dataset.py records {source.sha256} for {file}: not the upstream file. "
                    "Move it out of the way (or delete it) and run dcpmi fetch again, which "
                    "downloads the upstream file."
                )
            yield Fetched(file, None, digest, what or NOT_RECORDED)
            continue
        path = _download(file, mirror, fetching=True)  # checked against the recorded sha256
        digest = sha256_of(path)
        try:
            _copy_into(path, target)
        except OSError as err:  # a folder that cannot be written (no room, no permission)
            raise DataError(
                f"{target}: cannot be written ({err.strerror or err}); give dcpmi fetch "
                "--data_dir a folder you can write to, with room for the files (about 30 MB)."
            ) from err
        url = source.url if mirror is None else mirror.address(source.url)
        yield Fetched(file, url, digest, known_as(file, digest) or NOT_RECORDED)


def _copy_into(source: Path, target: Path) -> None:
    """``source`` (a file or a folder) copied to ``target``, which appears whole or not at
    all (an interrupted copy leaves only ``.<name>.partial``, replaced on the next run)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    if partial.is_dir():
        shutil.rmtree(partial)
    elif partial.exists():
        partial.unlink()
    # copyfile: the bytes only, not the cache's modes (a read-only copy could not be replaced)
    if source.is_dir():
        shutil.copytree(source, partial, copy_function=shutil.copyfile)
    else:
        shutil.copyfile(source, partial)
    os.replace(partial, target)
