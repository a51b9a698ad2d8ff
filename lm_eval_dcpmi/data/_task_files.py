"""The data files a task read, with their sha256 (``_digests``): what ``DCPMITask`` records
in its metadata, so that ``dcpmi verify`` can tell whether a results file scored the files
at hand."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.data._digests import file_sha256, sha256_of


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
    from lm_eval_dcpmi.data._loaders import locate  # imports datasets: only when called

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
