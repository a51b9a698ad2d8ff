"""The ``dcpmi`` command line: ``dcpmi run`` (its steps and lm-eval's options) and ``report``."""
