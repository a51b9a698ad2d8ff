"""Tables and figures like the DC-PMI paper's, from lm-eval results files.

``dcpmi report RESULTS... [--out DIR] [--options-csv FILE]`` reads the ``results_*.json``
files that ``lm_eval ... --output_path DIR`` writes and shows, per model, the accuracy of
the five decision rules (``scoring.METHODS``) on every DC-PMI task:

* **Unc** (``acc_unc``): the option's probability after the domain premise alone;
* **LM** (``acc``): log P(option | premise), lm-eval's usual ``acc``;
* **Avg** (``acc_avg``): the same, divided by the option's token count;
* **Char** (``acc_norm``): the same, divided by the option's character count;
* **DC-PMI** (``acc_dcpmi``): log P(option | premise) - log P(option | domain premise).

The parts, by job: ``results`` (the data model, from a results dict), ``loading`` (files
and folders), ``samples`` (the ``--log_samples`` files), ``stats`` (intervals and paired
tests), ``tables`` / ``studies`` / ``intervals`` / ``summary`` / ``competition`` (PMA
quartiles: where DC-PMI's gains come from) (Markdown and CSV),
``figures``, ``options`` (the per-option export) and ``output`` (the files written, all
or nothing; ``dcpmi report`` is ``lm_eval_dcpmi.cli.report``).

"Best" is decided on the numbers as shown (percent, one decimal), so two methods that
print the same are tied; ``n/a`` (computed as NaN) and ``–`` (absent from the file) are
never best. Only the standard library, PyYAML and, for figures and tests, matplotlib and
scipy are used; nothing here imports lm-eval or torch except the per-option export's
token counting.
"""

from lm_eval_dcpmi.report.figures import (
    COLOURS,
    dcpmi_gain,
    figure_name,
    plot_run,
    plot_study,
    study_figure_name,
)
from lm_eval_dcpmi.report.loading import load_results
from lm_eval_dcpmi.report.options import write_options_csv
from lm_eval_dcpmi.report.output import FORMATS, report_command
from lm_eval_dcpmi.report.results import (
    LABELS,
    METHODS,
    MISSING,
    NA,
    ReportError,
    RunResults,
    Study,
    TaskRow,
    model_label,
    run_from_dict,
)
from lm_eval_dcpmi.report.summary import Share, summary, summary_csv, summary_markdown
from lm_eval_dcpmi.report.tables import (
    CSV_HEADER,
    csv_report,
    format_run,
    format_run_table,
    markdown_report,
    markdown_table,
)

__all__ = [
    "COLOURS",
    "CSV_HEADER",
    "FORMATS",
    "LABELS",
    "METHODS",
    "MISSING",
    "NA",
    "ReportError",
    "RunResults",
    "Share",
    "Study",
    "TaskRow",
    "csv_report",
    "dcpmi_gain",
    "figure_name",
    "format_run",
    "format_run_table",
    "load_results",
    "markdown_report",
    "markdown_table",
    "model_label",
    "plot_run",
    "plot_study",
    "report_command",
    "run_from_dict",
    "study_figure_name",
    "summary",
    "summary_csv",
    "summary_markdown",
    "write_options_csv",
]
