"""The scoring rules: the one table of metrics and the probabilities they read
(``_scoring``), their registration with lm-eval (``_registry``) and where each request of a
document lies (``_layout``).
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "DEFAULT_LAYOUT": "_layout",
    "DOMAIN": "_layout",
    "Layout": "_layout",
    "dcpmi_metric_list": "_registry",
    "register_metrics": "_registry",
    "ACCURACIES": "_scoring",
    "COUNTS": "_scoring",
    "DOMAIN_MASS": "_scoring",
    "DocumentScores": "_scoring",
    "GROUP_METRICS": "_scoring",
    "HEADLINE": "_scoring",
    "MASS": "_scoring",
    "MEASURES": "_scoring",
    "METHODS": "_scoring",
    "METRICS": "_scoring",
    "METRIC_BY_NAME": "_scoring",
    "Metric": "_scoring",
    "PLAIN": "_scoring",
    "REQUIRED": "_scoring",
    "TIED_DOMAIN": "_scoring",
    "TRUNCATED": "_scoring",
    "UNRANKED": "_scoring",
    "accuracies": "_scoring",
    "listed_metrics": "_scoring",
    "measures": "_scoring",
    "metric_named": "_scoring",
    "predictions": "_scoring",
    "task_metrics": "_scoring",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
