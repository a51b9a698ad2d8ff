"""Tables and figures like the DC-PMI paper's, from lm-eval results files.

``dcpmi report RESULTS... [--out DIR] [--options-csv FILE]`` reads the ``results_*.json``
files that ``lm_eval ... --output_path DIR`` writes and shows, per model, the accuracy of
the five decision rules (``lm_eval_dcpmi.rules.METHODS``) on every DC-PMI task:

* **Unc** (``acc_unc``): the option's probability after the domain premise alone;
* **LM** (``acc``): log P(option | premise), lm-eval's usual ``acc``;
* **Avg** (``acc_avg``): the same, divided by the option's token count;
* **Char** (``acc_norm``): the same, divided by the option's character count;
* **DC-PMI** (``acc_dcpmi``): log P(option | premise) - log P(option | domain premise).

The modules, by job: ``_results`` (the data model, from a results dict), ``_loading``
(files and folders) and ``_integrity`` (what a results file and its samples must hold),
``_samples`` (the ``--log_samples`` files), ``_stats`` (intervals and paired tests),
``_tables``, ``_studies``, ``_intervals``, ``_summary``, ``_comparisons`` (calibration and
the priors study) and ``_competition`` (PMA quartiles: where DC-PMI's gains come from), in
Markdown and CSV written as ``_formatting`` says, with each metric labelled and coloured as
``_looks`` says; ``_figures``, ``_options`` (the per-option export) and ``_output`` (the
files written, all or nothing; ``dcpmi report`` is ``lm_eval_dcpmi.cli._report``).

"Best" is decided on the numbers as shown (percent, one decimal), so two methods that
print the same are tied; ``n/a`` (computed as NaN) and ``–`` (absent from the file) are
never best. Only the standard library, PyYAML and, for figures and tests, matplotlib and
scipy are used; nothing here imports lm-eval or torch except the per-option export's
token counting, and lm-eval's parser for model arguments a results file records as text.
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "dcpmi_gain": "_figures",
    "plot_run": "_figures",
    "summary_markdown": "_summary",
    "markdown_table": "_tables",
    "load_results": "_loading",
    "PAPER": "_looks",
    "metric_label": "_looks",
    "metric_look": "_looks",
    "FORMATS": "_output",
    "Output": "_output",
    "report_command": "_output",
    "text_output": "_output",
    "write_all": "_output",
    "ReportError": "_results",
    "RunResults": "_results",
    "TaskRow": "_results",
    "run_from_dict": "_results",
    "DocumentOptions": "_samples",
    "HASH_FIELDS": "_samples",
    "document_options": "_samples",
    "read_samples": "_samples",
    "request_pairs": "_samples",
    "samples_files": "_samples",
    "task_hash": "_samples",
    "task_layout": "_samples",
    "wilson": "_stats",
    "csv_report": "_tables",
    "format_run": "_tables",
    "markdown_report": "_tables",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
