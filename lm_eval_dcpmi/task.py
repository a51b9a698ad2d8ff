"""The name task YAMLs give the task class: ``class: !function lm_eval_dcpmi.task.DCPMITask``.

The class lives in ``lm_eval_dcpmi.tasks.task``; this module only re-exports its public names.
"""

from lm_eval_dcpmi.tasks.task import (
    METHODS,
    DCPMIConfigError,
    DCPMITask,
    affix,
    dcpmi_metric_list,
    premise_version,
)

__all__ = [
    "METHODS",
    "DCPMIConfigError",
    "DCPMITask",
    "affix",
    "dcpmi_metric_list",
    "premise_version",
]
