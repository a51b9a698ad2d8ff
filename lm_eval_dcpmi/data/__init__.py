"""The evaluation data: a loader per file format, the dataset folders, record checks, text
files read with care.

The task YAMLs name the loaders here (``custom_dataset: !function lm_eval_dcpmi.data.jsonl``);
a dataset folder's ``dataset.py`` uses ``Upstream``, ``Row`` and the record helpers.
Modules: ``_loaders`` (finding and reading the files), ``_folders`` (the dataset
folders), ``_records`` (record checks), ``_text_files`` (text read with errors that name
file, line and byte), ``_user_json`` (a user's ``dataset_path: json`` file),
``_digests`` (the sha256 of files and folders), ``_task_files`` (the data files a task
read, with their sha256), ``_upstream`` (where a download goes, ``DCPMI_DATA_MIRROR``, and
the sha256 it must bring), ``_fetch`` (``dcpmi fetch``: every file into a data folder).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "file_sha256": "_digests",
    "sha256_of": "_digests",
    "Fetched": "_fetch",
    "default_data_dir": "_fetch",
    "fetch": "_fetch",
    "KnownCopy": "_folders",
    "Upstream": "_folders",
    "csv_rows": "_loaders",
    "jsonl": "_loaders",
    "labelled_lines": "_loaders",
    "labelled_lines_with_examples": "_loaders",
    "locate": "_loaders",
    "race_folder": "_loaders",
    "tsv": "_loaders",
    "xml_items": "_loaders",
    "RecordError": "_records",
    "Row": "_records",
    "field": "_records",
    "index_in": "_records",
    "nonempty": "_records",
    "option_texts": "_records",
    "task_data_files": "_task_files",
    "known_as": "_upstream",
    "MIRROR_ENV": "_upstream",
    "mirror_from_env": "_upstream",
    "UPSTREAM_FILE": "_upstream",
    "loading_json": "_user_json",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
