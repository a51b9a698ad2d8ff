"""The DC-PMI task: the class the YAMLs name (``class: !function
lm_eval_dcpmi.task.DCPMITask``) and its parts.

Modules: ``_dcpmi_task`` (the class, and CC's content-free scores), ``_references`` (the
reference contexts and content-free fields a YAML declares), ``_rendering`` (premises and
prompts), ``_document_checks`` and ``_null_fields`` (every document checked when the task
is built), ``_request_checks`` (when its requests are built), ``_document_store`` (what it
keeps per document), ``_tokens`` (token counts), ``_derive`` (``base_task:`` and
``--dcpmi_task``), ``_catalogue`` (``--dcpmi_task`` over lm-eval's whole multiple-choice
catalogue, scripts/sweep_catalogue.py), ``_premise_digest`` (the ``+premise.<digest>``
version rule), ``_shards`` (a shard's documents) and ``_quick_look`` (``--quick``'s
documents, ``--limit``'s labels).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "DCPMIConfigError": "_dcpmi_task",
    "DCPMITask": "_dcpmi_task",
    "METHODS": "_dcpmi_task",
    "dcpmi_metric_list": "_dcpmi_task",
    "DCPMI_TASK_KEY": "_derive",
    "DCPMI_TASK_OPTION": "_derive",
    "DERIVED_SUFFIX": "_derive",
    "note_task_manager": "_derive",
    "option_value": "_derive",
    "parse_dcpmi_task": "_derive",
    "write_derived_tasks": "_derive",
    "gold_index": "_document_checks",
    "document_choices": "_document_checks",
    "DERIVED_KEY": "_premise_digest",
    "derived_label": "_premise_digest",
    "derived_rule": "_premise_digest",
    "premise_digest_in": "_premise_digest",
    "premise_version": "_premise_digest",
    "text_sha256": "_premise_digest",
    "short_digest": "_premise_digest",
    "premise_versioned": "_premise_digest",
    "QUICK_OPTION": "_quick_look",
    "prefix_size": "_quick_look",
    "quick_samples": "_quick_look",
    "skewed_tasks": "_quick_look",
    "warn_skewed": "_quick_look",
    "CONTENT_FREE_INPUTS": "_references",
    "check_task_name": "_references",
    "content_free_fields": "_references",
    "identity_sha256": "_references",
    "reference_contexts": "_references",
    "affix": "_rendering",
    "SHARD_OPTION": "_shards",
    "Shard": "_shards",
    "refuse_unmergeable": "_shards",
    "shard_samples": "_shards",
    "counter_for_metadata": "_tokens",
    "share_tokenizer": "_tokens",
    "shared_tokenizer": "_tokens",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
