"""The plugin's errors: each one is a message for the user, not a bug report.

``dcpmi run`` prints any ``DCPMIError`` as one line and exits with status 2; under plain
``lm_eval`` the autoload hook prints it without a traceback (see ``_autoload``).
"""

from __future__ import annotations


class DCPMIError(ValueError):
    """Bad input (data file, task config, option): the message names it and how to fix it."""


class DCPMIConfigError(DCPMIError):
    """A task YAML that cannot be scored with DC-PMI; the message says how to fix it."""


class DataError(DCPMIError):
    """A data file is missing or holds a record the task cannot score."""
