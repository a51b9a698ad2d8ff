"""Domain Conditional PMI (Holtzman et al., EMNLP 2021) for lm-evaluation-harness.

This module stays import-light: it is imported at interpreter start-up by the
plugin's ``.pth`` hook (see ``_autoload``), so it must not import lm-eval or torch.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

__all__ = ["__version__", "task_configs_dir"]


def task_configs_dir() -> Path:
    """The folder holding the plugin's task YAMLs (give it to ``--include_path``).

    In a wheel install the YAMLs live inside the package; in a source checkout
    (editable install, tests) they are the repository's top-level ``task_configs/``.
    """
    packaged = Path(__file__).parent / "task_configs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).parent.parent / "task_configs"
