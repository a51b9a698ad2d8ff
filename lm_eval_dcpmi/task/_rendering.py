"""Rendering a DC-PMI task's premises and prompts, with a fault named for its document:
the reference contexts' premises (``premise_text``), lm-eval's prompt around one
(``reference_context``), and the task's own prompt on a content-free document
(``content_free_context``). The checks at task build and the requests use these same
functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2

from lm_eval_dcpmi._harness import (
    compile_templates_once,
    gen_prefix,
    jinja_env,
    prompt_with_text,
    sandboxed_jinja_env,
    template_error,
)
from lm_eval_dcpmi.errors import DCPMIConfigError, DCPMIError
from lm_eval_dcpmi.rules import DOMAIN
from lm_eval_dcpmi.task import _references as references


def affix(value: str, before: str = "", after: str = "") -> str:
    """Jinja filter: ``options | map('affix', ' "', '"') | list`` wraps every option."""
    return f"{before}{value}{after}"


# lm-eval renders every template with this one Jinja environment (it registers
# its own `regex_replace` filter the same way).
jinja_env().filters.setdefault("affix", affix)
# A DC-PMI task renders each template several times a document (its checks, its requests,
# its reference contexts); lm-eval 0.4 would compile it anew each time.
compile_templates_once()


def fault(task: Any, doc: Any, doc_id: int | None, message: str) -> DCPMIConfigError:
    """A one-line error naming the task, its YAML and the document."""
    where = f"document {doc_id}" if doc_id is not None else "a document"
    if isinstance(doc, dict) and doc.get("source"):
        where += f" ({doc['source']})"
    return DCPMIConfigError(f"task {task.config.task} ({task.config_source}), {where}: {message}")


def compile_premise(
    template: str, task_name: str, source: str, reference: str = "domain"
) -> jinja2.Template:
    """A premise template compiled once in the sandboxed twin of lm-eval's Jinja environment
    (``apply_template`` compiles it for every document in lm-eval's own; rendering the
    compiled one gives the same text). Sandboxed: a results file records a ``--dcpmi_task``
    premise, which verify, merge and export compile again on a stranger's file."""
    line = "`domain_premise:`" if reference == "domain" else f"`reference_contexts: {reference}:`"
    if not template.strip():
        raise DCPMIConfigError(
            f"task {task_name} ({source}): the {reference} premise {template!r} is only "
            f"whitespace; a reference context needs some text. Fix its {line} line."
        )
    try:
        return sandboxed_jinja_env().from_string(template)
    except jinja2.TemplateError as err:
        raise DCPMIConfigError(
            f"task {task_name} ({source}): the {reference} premise {template!r} is not a valid "
            f"Jinja template ({err}); fix its {line} line."
        ) from err


def field_names(doc: Any) -> str:
    """A document's fields, for messages that say which it has."""
    return ", ".join(sorted(doc)) if isinstance(doc, dict) else type(doc).__name__


def rendered(
    task: Any, what: str, render: Callable[[Any], Any], doc: Any, doc_id: int | None
) -> Any:
    """``render(doc)``, with a failure of a template or function named for the document."""
    try:
        return render(doc)
    except DCPMIError:
        raise
    except Exception as raised:  # a user's template or !function: any error is theirs to fix
        err = template_error(raised)  # as the template raised it, whatever lm-eval wraps
        if isinstance(err, jinja2.UndefinedError):  # lm-eval's environment is StrictUndefined
            fields = field_names(doc)
            raise fault(
                task,
                doc,
                doc_id,
                f"{what} uses a field the document lacks: {err}; the document's fields: "
                f"{fields}. Fix the template in the task's YAML, or the data.",
            ) from err
        raise fault(task, doc, doc_id, f"{what} failed: {type(err).__name__}: {err}.") from err


def shown(text: str, limit: int = 60) -> str:
    """``text`` for a message: whole when short, else its start."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def content_free_doc(task: Any, doc: dict, text: str = "N/A") -> dict:
    """``doc`` with ``text`` in every content-free field."""
    return {**doc, **dict.fromkeys(task.content_free_fields, text)}


def premise_text(
    task: Any, reference: references.ReferenceContext, doc: dict, doc_id: int | None = None
) -> str:
    """What stands in for the document's text in a reference context (never blank);
    empty for the empty context."""
    if reference.kind == "empty":
        return ""
    if reference.kind == "last_word":
        premise = rendered(task, "doc_to_text", task.doc_to_text, doc, doc_id)
        text = references.last_word(premise) if isinstance(premise, str) else ""
        if reference.name == DOMAIN and not text.strip():
            raise fault(task, doc, doc_id, _no_last_word(premise))
        what = "the last word of the premise"
    else:
        what = f"the {reference.name} premise {reference.template!r}"
        template = task.premise_templates[reference.name]
        text = rendered(task, what, lambda d: template.render(**d), doc, doc_id)
    if not text.strip():
        raise fault(
            task,
            doc,
            doc_id,
            f"{what} renders "
            + ("empty" if not text else f"only whitespace ({text!r})")
            + "; a reference context needs some text.",
        )
    return text


def _no_last_word(premise: Any) -> str:
    """Why a derived domain premise cannot be taken from ``premise`` (doc_to_text's)."""
    if isinstance(premise, str):
        found = "is empty" if not premise else f"is only whitespace ({premise!r})"
    else:  # several inputs (Winogrande's form): doc_to_text gives the gold option's index
        found = f"is {type(premise).__name__} {premise!r}, not a text"
    return (
        f"the domain premise is the premise's last word, but the premise (doc_to_text) "
        f"{found}: it has no last word; write the domain premise instead "
        "(`domain_premise:` in the task's YAML, or --dcpmi_task TASK=PREMISE)."
    )


def reference_context(
    task: Any, reference: references.ReferenceContext, doc: dict, doc_id: int | None = None
) -> str:
    """The reference context: its premise inside the prompt lm-eval would build around a
    document's text (system instruction, description, chat template and gen_prefix, no
    examples), or the empty string."""
    if reference.kind == "empty":
        return ""
    # the premise as the checks at task build rendered it (once); a document they did not
    # see (none, in lm-eval's runs) is rendered now
    store = getattr(task, "rendered_premises", None)  # None while the task is being built
    premise = store.get(doc, reference.name) if store is not None else None
    if premise is None:
        premise = premise_text(task, reference, doc, doc_id)
    options = task.build_options
    return prompt_with_text(
        task,
        doc,
        premise,
        system_instruction=options.get("system_instruction"),
        apply_chat_template=options.get("apply_chat_template", False),
        chat_template=options.get("chat_template"),
    )


def content_free_context(task: Any, doc: dict, text: str) -> str:
    """The task's own prompt, few-shot examples and chat template included, with
    ``text`` in every content-free field of ``doc`` (contextual calibration)."""
    free = content_free_doc(task, doc, text)
    options = task.build_options
    # the sampler's draw for the content-free prompt must not shift the documents' own
    with references.same_fewshot_draws(task):
        return task.fewshot_context(
            free,
            num_fewshot=task.config.num_fewshot or 0,
            system_instruction=options.get("system_instruction"),
            apply_chat_template=options.get("apply_chat_template", False),
            fewshot_as_multiturn=options.get("fewshot_as_multiturn", False),
            chat_template=options.get("chat_template"),
            gen_prefix=gen_prefix(task, free),
        )
