"""``dcpmi verify``: a submission's documents and requests built again from the data, every
number recomputed, and (``--rescore``) documents scored again.

Modules: ``_verify`` (the command's work), ``_submission`` (a results file read for a
leaderboard), ``_rebuild`` (documents and requests built again), ``_against_data`` (the
samples against the data), ``_recompute`` (every document decided again), ``_refusals``
(what no run can have made) and ``_rescore`` (scored again with the model the results
name).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "built_task": "_rebuild",
    "option_variant": "_rebuild",
    "TokenCounts": "_recompute",
    "close_enough": "_recompute",
    "mean_stderr": "_recompute",
    "logged_number": "_recompute",
    "score_documents": "_recompute",
    "score_task": "_recompute",
    "task_samples": "_recompute",
    "model_findings": "_refusals",
    "value_findings": "_refusals",
    "DEFAULT_TOLERANCE": "_rescore",
    "RescoreOptions": "_rescore",
    "check_tolerance": "_rescore",
    "parse_count": "_rescore",
    "Submission": "_submission",
    "TaskEntry": "_submission",
    "installed_differences": "_submission",
    "read_submission": "_submission",
    "results_files": "_submission",
    "VerifyOptions": "_verify",
    "refuse_unverified": "_verify",
    "verify_summary": "_verify",
    "verify": "_verify",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
