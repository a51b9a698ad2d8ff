"""Null fields a DC-PMI task's templates use: refused at task build, never scored as "None".

The datasets library fills a key that one JSON record lacks with ``None``; a template
that prints it would render the text "None". ``null_checks`` finds, once per task, the
fields each template reads; ``check_null_fields`` renders a template of a document with a
null field it reads, the field standing in as ``_Null``: ``None`` to Jinja's conditions
and tests, an error wherever its value is used.
"""

from __future__ import annotations

from typing import Any, NoReturn

import jinja2
import jinja2.meta

from lm_eval_dcpmi._harness import sandboxed_jinja_env


class _NullUsed(Exception):
    """A template used the value of a document's null field."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class _Null:
    """A document's null field while the check renders a template: ``None`` to Jinja's
    conditions and tests (``if``, ``or``, ``is none``, ``==``), an error wherever its
    value is used (printed as "None", concatenated, measured, indexed, called)."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, _Null)

    def __hash__(self) -> int:
        return hash(None)

    def _used(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise _NullUsed(self.field)

    __str__ = __repr__ = __format__ = __iter__ = __len__ = __getitem__ = __contains__ = _used
    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __call__ = __int__ = __float__ = _used
    __lt__ = __le__ = __gt__ = __ge__ = _used

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NullUsed(self.field)


# lm-eval's Jinja environment (its filters, StrictUndefined), sandboxed (it renders the
# premises, which a results file can carry), where `is none` is also true of a _Null.
_NULL_ENV = sandboxed_jinja_env().overlay()
_NULL_ENV.tests = {
    **sandboxed_jinja_env().tests,
    "none": lambda value: value is None or isinstance(value, _Null),
}

FIELD_TEMPLATES = ("doc_to_text", "doc_to_choice", "doc_to_target")
# (what, the fields it reads, its template in _NULL_ENV, or None when it is a field)
NullCheck = tuple[str, frozenset[str], "jinja2.Template | None"]


def null_checks(task: Any) -> list[NullCheck]:
    """What the task renders from a document's fields: the domain premise and every other
    premise-like reference context, doc_to_text (the content-free prompts too: the
    content-free fields hold text there), doc_to_choice and doc_to_target, each a field or
    a Jinja template (a list, a number or a ``!function`` is code the check cannot see
    into)."""
    sources = [
        (f"the {r.name} premise {r.template!r}", r.template, False)
        for r in task.references
        if r.kind == "premise"
    ]
    if getattr(task, "prompt", None) is None:  # a promptsource prompt is code too
        sources += [(name, getattr(task.config, name), True) for name in FIELD_TEMPLATES]
    features = set(getattr(task, "features", None) or [])
    checks: list[NullCheck] = []
    for what, source, may_be_field in sources:
        if not isinstance(source, str):
            continue
        if may_be_field and source in features:  # lm-eval reads the field itself
            checks.append((what, frozenset([source]), None))
            continue
        try:
            used = jinja2.meta.find_undeclared_variables(_NULL_ENV.parse(source))
            template = _NULL_ENV.from_string(source)
        except jinja2.TemplateError:  # lm-eval's own rendering names the error
            continue
        if used:
            checks.append((what, frozenset(used), template))
    return checks


def null_field_problem(doc: Any, checks: list[NullCheck]) -> str | None:
    """What is wrong when a field the document holds as null (the datasets library fills a
    key missing from some records of a JSON file with None) is used by a template's value
    (the domain premise, prompt or an option would hold the text "None"); None if nothing."""
    if not isinstance(doc, dict):
        return None
    nulls = {field for field, value in doc.items() if value is None}
    for what, used, template in checks:
        if not used & nulls:
            continue
        if template is None:
            (field,) = used
            return (
                f"{what} is the field {field!r}, missing (null) in this document; add it to "
                "the record (a key missing from a JSON record reads as null)."
            )
        try:
            template.render(**{**doc, **{field: _Null(field) for field in used & nulls}})
        except _NullUsed as err:
            return (
                f"{what} uses the field {err.field!r}, missing (null) in this document; add it "
                "to the record (a key missing from a JSON record reads as null), or let the "
                f"template skip it: `{{% if {err.field} is not none %}}...{{% endif %}}`."
            )
        except Exception:  # it fails with None as well: `rendered` names the error then
            pass
    return None
