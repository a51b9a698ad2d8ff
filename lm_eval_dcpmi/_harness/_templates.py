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


def template_error(error: Exception) -> BaseException:
    """The error a task's template or function raised, as lm-eval's rendering passed it on.

    0.4: ``lm_eval.utils.apply_template`` lets Jinja's error through. 0.5.0.dev1:
    ``apply_template`` (``lm_eval/config/templates.py``) raises ``ValueError("Error
    rendering template: ...")`` from it; the error itself is its ``__cause__``.
    """
    cause = error.__cause__
    if (
        isinstance(error, ValueError)
        and cause is not None
        and str(error).startswith("Error rendering template:")
    ):
        return cause
    return error
