"""lm-eval's Jinja environment, in which every task template is rendered, and a sandboxed
twin of it for the templates a results file can carry (a domain premise)."""

from __future__ import annotations

import functools
import math
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


# The settings of lm-eval's environment its sandboxed twin takes over.
_SETTINGS = (
    "block_start_string",
    "block_end_string",
    "variable_start_string",
    "variable_end_string",
    "comment_start_string",
    "comment_end_string",
    "line_statement_prefix",
    "line_comment_prefix",
    "trim_blocks",
    "lstrip_blocks",
    "newline_sequence",
    "keep_trailing_newline",
    "undefined",
    "finalize",
    "autoescape",
)
_SANDBOXES: dict[int, Any] = {}


# The largest result of `**` and `*` a premise template may build: far above any text a
# prompt holds, far below what stalls the process.
MAX_RESULT = 100_000


@functools.cache
def _bounded_sandbox() -> type:
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class BoundedSandbox(ImmutableSandboxedEnvironment):
        # intercepted operators are also never folded at compile time
        intercepted_binops = frozenset({"**", "*"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and _number(left) and _number(right):
                if abs(left) > 1 and right * math.log2(max(abs(left), 2)) > 4 * MAX_RESULT:
                    raise SecurityError(f"{left!r} ** {right!r} is too large to compute")
            if operator == "*":
                sized = [len(x) for x in (left, right) if isinstance(x, (str, list, tuple))]
                times = [x for x in (left, right) if isinstance(x, int)]
                if sized and times and sized[0] * max(times[0], 0) > MAX_RESULT:
                    raise SecurityError(f"a repetition of {sized[0] * times[0]:,} items")
            return super().call_binop(context, operator, left, right)

    return BoundedSandbox


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sandboxed_jinja_env() -> Any:
    """lm-eval's Jinja environment as a ``jinja2.sandbox.ImmutableSandboxedEnvironment``:
    the same settings (StrictUndefined ...) and the very same filters, tests and globals
    (one dict each, so a filter registered later is there too), but no reach from a
    template into Python (``cycler.__init__.__globals__.os`` is a ``SecurityError``).

    Premise templates are compiled here: a results file records the premise of a
    ``--dcpmi_task`` run, and ``dcpmi verify``, ``merge`` and ``export`` build the task
    again from it, on files strangers send. A template that needs no such reach (every
    task's) renders the same text in both environments.
    """
    env = jinja_env()
    sandbox = _SANDBOXES.get(id(env))
    if sandbox is None or sandbox.filters is not env.filters:
        sandbox = _bounded_sandbox()(**{k: getattr(env, k) for k in _SETTINGS})
        sandbox.filters, sandbox.tests, sandbox.globals = env.filters, env.tests, env.globals
        _SANDBOXES[id(env)] = sandbox
    return sandbox


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
