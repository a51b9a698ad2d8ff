"""The evaluation data: a loader per file format, record checks, text files read with care.

The task YAMLs name the loaders here (``custom_dataset: !function lm_eval_dcpmi.data.jsonl``).
"""

from lm_eval_dcpmi.data.loaders import (
    csv_rows,
    jsonl,
    labelled_lines,
    labelled_lines_with_examples,
    race_folder,
    tsv,
    xml_items,
)

__all__ = [
    "csv_rows",
    "jsonl",
    "labelled_lines",
    "labelled_lines_with_examples",
    "race_folder",
    "tsv",
    "xml_items",
]
