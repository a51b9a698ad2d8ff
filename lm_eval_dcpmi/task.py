"""The name task YAMLs give the task class: ``class: !function lm_eval_dcpmi.task.DCPMITask``.

The class lives in ``lm_eval_dcpmi.tasks.dcpmi_task``; this module only re-exports the public
names the YAMLs and users import.
"""

from lm_eval_dcpmi.tasks.dcpmi_task import METHODS, DCPMIConfigError, DCPMITask, dcpmi_metric_list
from lm_eval_dcpmi.tasks.premise_digest import premise_version
from lm_eval_dcpmi.tasks.rendering import affix

__all__ = [
    "METHODS",
    "DCPMIConfigError",
    "DCPMITask",
    "affix",
    "dcpmi_metric_list",
    "premise_version",
]
