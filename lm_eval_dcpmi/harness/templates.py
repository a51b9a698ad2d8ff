"""lm-eval's Jinja environment, in which every task template is rendered."""

from __future__ import annotations

from typing import Any


def jinja_env() -> Any:
    """The ``jinja2.Environment`` lm-eval renders every task template with.

    0.4: the module global ``lm_eval.utils.env`` (``lm_eval/utils.py``, used by
    ``apply_template``; StrictUndefined, lm-eval's own ``regex_replace`` filter).
    """
    from lm_eval import utils

    env = getattr(utils, "env", None)
    if env is None:  # 0.5.0.dev1: lm_eval/config/templates.py, one cached environment
        from lm_eval.config.templates import _jinja_env

        env = _jinja_env()
    return env
