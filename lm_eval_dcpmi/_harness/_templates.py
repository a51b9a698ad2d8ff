"""lm-eval's Jinja environment, in which every task template is rendered."""

from __future__ import annotations

import functools
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


def compile_templates_once() -> None:
    """Make lm-eval 0.4 compile each template once, as 0.5.0.dev1 does.

    0.4's ``lm_eval.utils.apply_template`` compiles the template again for every call: a
    task renders its ``doc_to_text``, ``doc_to_choice`` and ``doc_to_target`` for every
    document, several times, so compiling was half of ``dcpmi verify``'s time on 16 tasks
    of 1,000 documents (114 s, 62 s compiled once). 0.5.0.dev1 keeps the compiled
    templates (``lm_eval/config/templates.py``: ``_compile_tpl``, an ``lru_cache`` of 256);
    this gives 0.4 the same cache, in lm-eval's own environment, so every text rendered is
    the same. Idempotent; nothing where ``apply_template`` is not 0.4's.
    """
    from lm_eval import utils

    apply = getattr(utils, "apply_template", None)
    env = getattr(utils, "env", None)
    if env is None or apply is None or getattr(apply, "compiles_once", False):
        return

    @functools.lru_cache(maxsize=256)
    def compiled(template: str) -> Any:
        return env.from_string(template)

    def apply_template(template: str, doc: dict) -> str:
        if not isinstance(template, str):  # unhashable: lm-eval's own, error and all
            return apply(template, doc)
        return compiled(template).render(**doc)

    apply_template.compiles_once = True  # type: ignore[attr-defined]
    apply_template.__wrapped__ = apply  # type: ignore[attr-defined]
    utils.apply_template = apply_template


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
