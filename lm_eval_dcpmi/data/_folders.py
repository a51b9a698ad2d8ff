"""The dataset folders: everything about one dataset lives in ``task_configs/<dataset>/``.

Besides its task YAMLs, a folder holds

* ``dataset.py``: ``FILES``, the dataset's files (paths in the data folder, which start
  with the folder's name), where each is downloaded from and its sha256 (``Upstream``); and
  ``RECORDS``, the record readers its YAMLs name in ``dataset_kwargs.record``: each checks
  one raw row, adds ``gold`` and raises ``_records.RecordError`` on a bad one;
* ``README.md``: the source, paper, split and counts, the exact strings, the paper's numbers;
* ``first_documents.json``: each task's document count and its first documents' gold
  indices and requests, which tests/test_dataset_folders.py compares the built tasks with.

The loaders (``_loaders``) read a YAML's ``record`` name and a file's upstream address from
here, so a new dataset is one new folder. Readers several datasets share (ARC's,
OpenBookQA's and CommonsenseQA's question-and-choices format) stay in ``_records``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi.errors import DCPMIConfigError

MODULE = "dataset.py"
README = "README.md"
FIRST_DOCUMENTS = "first_documents.json"
FOLDER_FILES = (MODULE, README, FIRST_DOCUMENTS)

Reader = Callable[[dict[str, Any]], "dict[str, Any] | None"]


@dataclass(frozen=True)
class KnownCopy:
    """A copy of a dataset file other than the upstream one, accepted in its place and named
    wherever its digest shows (HellaSwag's rebuilt file, which the committed results read)."""

    sha256: str
    what: str  # how messages name it, e.g. "the rebuilt HellaSwag file (...)"


@dataclass(frozen=True)
class Upstream:
    """Where a dataset file comes from when no data folder is set, and what it must be."""

    url: str  # the file itself, or an archive that holds it
    member: str | None = None  # the file's path inside the archive (None: the url is it)
    # The file's sha256 (a folder's: _digests.folder_sha256), checked after each download;
    # None: not recorded (a user's own dataset folder), not checked.
    sha256: str | None = None
    copies: tuple[KnownCopy, ...] = ()  # other copies accepted in its place


def dataset_folders(root: Path | None = None) -> dict[str, Path]:
    """Dataset name -> its folder: the folders of ``root`` (default: the plugin's
    ``task_configs``) that hold a ``dataset.py``."""
    root = root or task_configs_dir()
    return {path.parent.name: path.parent for path in sorted(root.glob(f"*/{MODULE}"))}


@functools.cache
def _modules(root: Path) -> dict[str, ModuleType]:
    found = {}
    for name, folder in dataset_folders(root).items():
        path = folder / MODULE
        spec = importlib.util.spec_from_file_location(f"lm_eval_dcpmi_datasets.{name}", path)
        if spec is None or spec.loader is None:  # a safeguard: the file exists
            raise DCPMIConfigError(f"{path}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for key, kind in (("FILES", Mapping), ("RECORDS", Mapping)):
            if not isinstance(getattr(module, key, None), kind):
                raise DCPMIConfigError(
                    f"{path}: needs {key}, a dict (see lm_eval_dcpmi/data/_folders.py)"
                )
        strays = [file for file in module.FILES if not str(file).startswith(f"{name}/")]
        if strays:
            raise DCPMIConfigError(
                f"{path}: FILES {strays} lie outside the data folder's {name}/; a dataset's "
                "files are <dataset>/<file>, named after its folder."
            )
        found[name] = module
    return found


def dataset_module(name: str, root: Path | None = None) -> ModuleType:
    """The ``dataset.py`` of dataset folder ``name``."""
    modules = _modules(root or task_configs_dir())
    if name not in modules:
        raise DCPMIConfigError(
            f"no dataset folder {name!r} (with a {MODULE}); known: {', '.join(modules)}"
        )
    return modules[name]


def record_readers(root: Path | None = None) -> dict[str, tuple[Reader, str]]:
    """Every folder's record readers: name -> (reader, the folder that declares it)."""
    found: dict[str, tuple[Reader, str]] = {}
    for folder, module in _modules(root or task_configs_dir()).items():
        for name, reader in module.RECORDS.items():
            if name in found and found[name][0] is not reader:
                raise DCPMIConfigError(
                    f"record reader {name!r} is declared by both task_configs/{found[name][1]}/"
                    f"{MODULE} and task_configs/{folder}/{MODULE}; rename one."
                )
            found[name] = (reader, folder)
    return found


def upstream(file: str, root: Path | None = None) -> Upstream | None:
    """Where ``file`` (a path in the data folder) is downloaded from, if a folder says."""
    module = _modules(root or task_configs_dir()).get(file.split("/", 1)[0])
    return None if module is None else module.FILES.get(file)


def upstream_files(root: Path | None = None) -> dict[str, Upstream]:
    """Every file the dataset folders name (path in the data folder -> its ``Upstream``), in
    the folders' order."""
    return {
        file: source
        for module in _modules(root or task_configs_dir()).values()
        for file, source in module.FILES.items()
    }
