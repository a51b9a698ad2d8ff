"""A DC-PMI task's reference contexts and content-free inputs, read from its YAML.

A *reference context* stands where the premise stood, and the options are scored after it
too: PMI under that prior is log P(y | premise) - log P(y | reference context). Every
DC-PMI task has the paper's, named ``domain`` (its ``domain_premise:``, written, or
``{kind: last_word}``: derived from each document's premise, the default of a
``base_task:`` variant); a task may add more under ``reference_contexts:``, each one of

* a string: a premise template (Jinja over the document, like ``domain_premise``);
* ``{kind: empty}``: lm-eval's unconditional context, the empty string (the model then
  conditions on its prefix token, as for lm-eval's ``acc_mutual_info``);
* ``{kind: last_word}``: the last word of the document's premise, with its leading space
  (the paper's rule for HellaSwag; ``last_word``). A premise with no whitespace inside it
  has no last word shorter than itself: the task refuses the derived domain premise when
  most documents are such, and counts and names them otherwise (``_document_checks``).

``content_free_fields:`` names the document fields that carry its input (SST-2:
``[sentence]``). The task then also scores contextual calibration (Zhao et al. 2021):
each content-free input of ``CONTENT_FREE_INPUTS`` takes the place of those fields in the
task's own prompt, and batch calibration (Zhou et al. 2024). Both need a fixed label set:
the same options for every document.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from lm_eval_dcpmi._harness import fewshot_random
from lm_eval_dcpmi._json_files import NOT_IN_A_NAME
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules import DOMAIN
from lm_eval_dcpmi.task import _premise_digest as premise_digest

# Zhao et al. (2021), "Calibrate Before Use", section 5: "N/A", the empty string, "[MASK]".
CONTENT_FREE_INPUTS: tuple[str, ...] = ("N/A", "", "[MASK]")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
KINDS = ("premise", "empty", "last_word")
# The domain premise derived from each document's premise when none is written (the
# paper's rule: "usually just the ending of the conditional premise"; HellaSwag's last word).
DERIVED_PREMISE = {"kind": "last_word"}


@dataclass(frozen=True)
class ReferenceContext:
    """One reference context of a task."""

    name: str
    kind: Literal["premise", "empty", "last_word"]
    template: str | None = None  # kind "premise": a Jinja template over the document

    @property
    def spec(self) -> Any:
        """As the YAML writes it (results files record it in the task's metadata)."""
        return self.template if self.kind == "premise" else {"kind": self.kind}


def last_word(premise: str) -> str:
    r"""The premise's last word with the whitespace before it, after trailing whitespace
    (the paper's HellaSwag rule, ``premise[premise.rfind(' '):]``): from its last ASCII
    space on. A premise without an ASCII space splits at its last whitespace of any kind,
    what ``str.split()`` splits on (a tab, a newline, a no-break space U+00A0, an
    ideographic space U+3000). A premise without any (one word, punctuation alone, Chinese
    or Japanese text) is its own last word: it has no shorter premise
    (``has_last_word``), and the task counts or refuses it (docs/custom-tasks.md).

    >>> last_word("A man is sitting on a roof. he")
    ' he'
    >>> last_word("Q: What colour is fresh snow?\nA:")  # the last ASCII space, as ever
    ' snow?\nA:'
    >>> last_word("Non-breaking\u00a0space\u00a0end")
    '\xa0end'
    >>> last_word("Snow")
    'Snow'
    """
    text = premise.rstrip()
    start = text.rfind(" ")
    if start < 0:
        start = max((i for i, c in enumerate(text) if c.isspace()), default=0)
    return text[start:]


def has_last_word(premise: str) -> bool:
    r"""Whether ``last_word`` gives ``premise`` a shorter premise: its text, without the
    whitespace around it, holds whitespace (``str.isspace``) between two words. A premise
    of one word, of punctuation alone, or in a script written without spaces has none.

    >>> [has_last_word(p) for p in ("Snow", "?!", " Snow ", "Tab\tlast", "今天天气很好。")]
    [False, False, False, True, False]
    """
    return any(c.isspace() for c in premise.strip())


def domain_reference(spec: Any, task: str, source: str) -> ReferenceContext:
    """The domain premise: a string (a Jinja template over the document), or a rule that
    derives each document's from its premise, ``{kind: last_word}`` (``DERIVED_PREMISE``,
    what a ``base_task:`` variant without ``domain_premise`` takes)."""
    if isinstance(spec, str) and spec:
        return ReferenceContext(DOMAIN, "premise", spec)
    if isinstance(spec, Mapping) and dict(spec) == DERIVED_PREMISE:
        return ReferenceContext(DOMAIN, "last_word")
    raise DCPMIConfigError(
        f"task {task} ({source}): DC-PMI needs a domain premise; add a line such "
        'as `domain_premise: " the answer is:"` (a string or a Jinja template over '
        "the document), or `domain_premise: {kind: last_word}` for each document's last "
        f"word; got {spec!r}."
    )


def reference_contexts(
    config: Mapping[str, Any], task: str, source: str
) -> tuple[ReferenceContext, ...]:
    """The task's reference contexts: ``domain`` first, then ``reference_contexts:`` in the
    YAML's order. ``DCPMIConfigError`` names the task and the entry at fault."""
    found = [domain_reference(config.get("domain_premise"), task, source)]
    extra = config.get("reference_contexts", {})
    if not isinstance(extra, Mapping):  # [] and an empty value too: leave the key out
        raise DCPMIConfigError(
            f"task {task} ({source}): `reference_contexts:` must map names to premises, e.g. "
            '`{answer: "Answer:", empty: {kind: empty}}`; got '
            f"{type(extra).__name__} {extra!r}."
        )
    repeated = repeated_names(source) if extra else []
    if repeated:
        raise DCPMIConfigError(
            f"task {task} ({source}): `reference_contexts:` names {', '.join(repeated)} more "
            "than once (YAML keeps the last one alone); give each reference context its own "
            "name."
        )
    for name, spec in extra.items():
        where = f"task {task} ({source}): reference context {name!r}"
        if not isinstance(name, str) or not _NAME.match(name) or name == DOMAIN:
            raise DCPMIConfigError(
                f"{where}: a name is lower-case letters, digits and '_' (it becomes the "
                f"metric acc_pmi_<name>), and not {DOMAIN!r}, which is the domain premise."
            )
        if isinstance(spec, str) and spec.strip():
            found.append(ReferenceContext(name, "premise", spec))
        elif isinstance(spec, Mapping) and set(spec) == {"kind"} and spec["kind"] in KINDS[1:]:
            found.append(ReferenceContext(name, spec["kind"]))
        else:
            raise DCPMIConfigError(
                f"{where}: {spec!r} is neither a premise (a non-blank string) nor "
                "`{kind: empty}` or `{kind: last_word}`."
            )
    return tuple(found)


def repeated_names(source: str) -> list[str]:
    """The names ``reference_contexts:`` gives more than once in the YAML file ``source``
    (its ``config_source``; PyYAML keeps the last silently): read from the file's nodes,
    before any value is built. [] when ``source`` is no YAML file that can be read."""
    path = Path(source)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return []
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []  # lm-eval read it: its own loader has the last word
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "reference_contexts" and isinstance(value, yaml.MappingNode):
            names = [str(name.value) for name, _spec in value.value]
            return sorted({repr(name) for name in names if names.count(name) > 1})
    return []


def content_free_fields(config: Mapping[str, Any], task: str, source: str) -> tuple[str, ...]:
    """The fields ``content_free_fields:`` names (none: the task has no CC or BC)."""
    fields = config.get("content_free_fields")
    if fields is None:
        return ()
    if (
        not isinstance(fields, list)
        or not fields
        or not all(isinstance(f, str) and f for f in fields)
        or len(set(fields)) != len(fields)
    ):
        raise DCPMIConfigError(
            f"task {task} ({source}): `content_free_fields:` lists the document fields that "
            f"hold the input, e.g. `[sentence]`; got {fields!r}."
        )
    return tuple(fields)


def identity_sha256(references: tuple[ReferenceContext, ...], fields: tuple[str, ...]) -> str:
    """The sha256 of what the task scores against: the domain premise alone for a task with
    nothing else (as before reference contexts existed), else every entry. Results record
    it as the task metadata's ``premise_sha256``."""
    if len(references) == 1 and not fields and references[0].kind == "premise":
        text = references[0].template or ""
    else:
        text = repr([(r.name, r.kind, r.template) for r in references] + [("cf", fields)])
    return premise_digest.text_sha256(text)


def metadata(references: tuple[ReferenceContext, ...], fields: tuple[str, ...]) -> dict[str, Any]:
    """The task metadata results files record: the domain premise (null, and the rule in
    ``_premise_digest.DERIVED_KEY``, when it is derived), and the other reference contexts and the
    content-free fields where the task has them (the report reads the request layout from
    these)."""
    domain = references[0]
    found: dict[str, Any] = {"domain_premise": domain.template}
    if domain.kind != "premise":  # none written: each document's, by this rule
        found[premise_digest.DERIVED_KEY] = domain.kind
    found["premise_sha256"] = identity_sha256(references, fields)
    if len(references) > 1:
        found["reference_contexts"] = {r.name: r.spec for r in references[1:]}
    if fields:
        found["content_free_fields"] = list(fields)
    return found


@contextlib.contextmanager
def same_fewshot_draws(task: Any) -> Iterator[None]:
    """Leaves the task's few-shot sampler as it was: a prompt built inside draws its
    examples without changing those the documents built after it draw."""
    generator = fewshot_random(task)
    state = generator.getstate() if hasattr(generator, "getstate") else None
    try:
        yield
    finally:
        if state is not None:
            generator.setstate(state)


def check_task_name(name: Any, source: str) -> None:
    """lm-eval writes a task's samples to ``samples_<task>_<date>.jsonl``: a name with a path
    separator there would only fail after every request is scored."""
    bad = [c for c in NOT_IN_A_NAME if c in str(name)]
    if bad:
        fixed = str(name)
        for c in bad:
            fixed = fixed.replace(c, "_")
        raise DCPMIConfigError(
            f"task {name!r} ({source}): lm-eval names the samples file after the task "
            f"(samples_<task>_<date>.jsonl), so {bad[0]!r} in its name makes a path that cannot "
            f"be written; name it without {bad[0]!r}, e.g. task: {fixed}"
        )
