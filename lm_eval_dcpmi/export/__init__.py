"""``dcpmi export``: results in the leaderboards' formats.

Modules: ``_export`` (the command's work), ``_export_options`` (what every format shares),
``_eee`` (Every Eval Ever records, validated against ``schemas/``), ``_hub`` (the Hub's
``.eval_results``), ``_model_card`` (a model card's ``model-index``) and ``_datasets``
(which public dataset each paper task scores).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "parse_dataset_option": "_datasets",
    "ExportOptions": "_export",
    "FORMATS": "_export",
    "HEADLINE": "_export",
    "export": "_export",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
