"""Per-document checks of a DC-PMI task: every fault named before the model scores anything.

When the task is built (``check_documents``, called by ``DCPMITask.__init__``), every
document of its evaluation split: null fields that a template uses, options (none empty
or whitespace only), target, rendered domain premise (idem), templates that fail on a
later document, degenerate options (a warning), and options far longer than the model's
window. When the requests are built: each request's exact token counts
(``check_token_counts``) and, when lm-eval read the requests from its request cache, that
they are the very requests the task builds now (``check_cached_requests``).
"""

from __future__ import annotations

import logging
import unicodedata
from typing import Any

import jinja2
import jinja2.meta

from lm_eval_dcpmi._harness import jinja_env, multiple_inputs, raw_target
from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.rules import DOMAIN, TIED_DOMAIN
from lm_eval_dcpmi.task import _null_fields as null_fields
from lm_eval_dcpmi.task import _references as references
from lm_eval_dcpmi.task._document_store import RenderedPremises
from lm_eval_dcpmi.task._rendering import content_free_doc, fault, field_names, rendered, shown
from lm_eval_dcpmi.task._tokens import TokenCounter

log = logging.getLogger(__name__)

# The check at task build counts an option's tokens on its own, without the context: a
# context boundary can merge a token or two into the option's first one, so only an
# option this far over the window is refused then; the requests' exact counts decide
# the rest when they are built.
WINDOW_MARGIN = 8


def document_choices(task: Any, doc: Any, doc_id: int) -> list[str]:
    """The document's options, each a non-empty string."""
    choices = rendered(task, "doc_to_choice", task.doc_to_choice, doc, doc_id)
    if not isinstance(choices, list) or not choices:
        raise fault(task, doc, doc_id, f"doc_to_choice gave {choices!r}, no options.")
    for number, choice in enumerate(choices):
        if not isinstance(choice, str) or not choice.strip():
            empty = "only whitespace" if isinstance(choice, str) and choice else "empty"
            raise fault(task, doc, doc_id, f"option {number} is {empty}: {choices!r}.")
    return choices


def gold_index(task: Any, doc: Any, doc_id: int, choices: list[str]) -> int:
    """The gold option's index (one option: several gold options are not supported)."""
    # Several inputs (Winogrande form): doc_to_text gives the gold option's index.
    several = multiple_inputs(task)
    field = "doc_to_text" if several else "doc_to_target"
    render = task.doc_to_text if several else lambda d: raw_target(task, d)
    gold = rendered(task, field, render, doc, doc_id)
    if isinstance(gold, str) and not several:
        if gold not in choices:
            raise fault(task, doc, doc_id, f"target {gold!r} is not among the options {choices}.")
        gold = choices.index(gold)
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
        raise fault(
            task,
            doc,
            doc_id,
            f"target {gold!r} is not an option index in 0..{len(choices) - 1}; {field} must "
            "give one option (several gold options are not supported).",
        )
    return gold


def _first(docs: list[tuple[int, Any, str]]) -> str:
    doc_id, doc, detail = docs[0]
    source = f" ({doc['source']})" if isinstance(doc, dict) and doc.get("source") else ""
    return f"first: document {doc_id}{source}{detail}"


def _documents(n: int) -> str:
    return "1 document has" if n == 1 else f"{n} documents have"


def check_documents(task: Any, counter: TokenCounter | None) -> RenderedPremises:
    """Every document of the task's evaluation split, when the task is built; returns each
    document's premises as rendered here (the requests use them)."""
    premises = RenderedPremises()
    duplicated: list[tuple[int, Any, str]] = []
    normalized: list[tuple[int, Any, str]] = []  # the same text in two Unicode forms
    answered: dict[str, list[tuple[int, Any, str]]] = {}  # premise -> docs it shows the gold
    # reference context -> the documents whose premise has no last word shorter than itself
    wordless: dict[str, list[tuple[int, Any, str]]] = {}
    single: list[tuple[int, Any, str]] = []
    # (doc_id, doc, option, continuation) of continuations longer than the window in UTF-8
    # bytes: no tokenizer makes more tokens than bytes (byte-level BPE, byte fallback), so
    # only these are counted; none, for most tasks and models.
    long: list[tuple[int, Any, int, str]] = []
    window = counter.max_length if counter is not None else None
    delimiter = task.config.target_delimiter
    fixed_labels: list[str] | None = None  # the first document's options (CC and BC)
    nulls = null_fields.null_checks(task)
    for doc_id, doc in enumerate(task.eval_docs):
        problem = null_fields.null_field_problem(doc, nulls)
        if problem is not None:
            raise fault(task, doc, doc_id, problem)
        choices = document_choices(task, doc, doc_id)
        gold = gold_index(task, doc, doc_id, choices)
        texts, premise = {}, None
        for reference in task.references:
            text = texts[reference.name] = task.premise_text(reference, doc, doc_id)
            if reference.kind == "premise" and _shows_only(text, choices, gold):
                answered.setdefault(reference.name, []).append((doc_id, doc, ""))
            if reference.kind == "last_word":  # premise_text refused a premise that is no text
                if premise is None:
                    premise = rendered(task, "doc_to_text", task.doc_to_text, doc, doc_id)
                if not references.has_last_word(premise):
                    wordless.setdefault(reference.name, []).append(
                        (doc_id, doc, f", {shown(premise)}")
                    )
        premises.add(doc, texts)
        if task.content_free_fields:
            fixed_labels = _check_fixed_labels(task, doc, doc_id, choices, fixed_labels)
            # any document may carry the content-free prompts (--samples picks the first)
            rendered(task, "doc_to_text", task.doc_to_text, content_free_doc(task, doc), doc_id)
        if len(choices) == 1:
            single.append((doc_id, doc, ""))
        elif len(set(choices)) < len(choices):
            twice = next(c for c in choices if choices.count(c) > 1)
            times = "twice" if choices.count(twice) == 2 else f"{choices.count(twice)} times"
            duplicated.append((doc_id, doc, f", {twice!r} {times}"))
        elif len({unicodedata.normalize("NFC", c) for c in choices}) < len(choices):
            alike = _alike(choices)
            normalized.append((doc_id, doc, f", {alike[0]!r} and {alike[1]!r}"))
        if window is None:
            continue
        if multiple_inputs(task):  # the options are contexts; the target is the continuation
            target = rendered(task, "doc_to_target", task.doc_to_target, doc, doc_id)
            continuations = {-1: f"{delimiter}{target}"}
        else:
            continuations = {k: f"{delimiter}{choice}" for k, choice in enumerate(choices)}
        long += [(doc_id, doc, k, t) for k, t in continuations.items() if len(t.encode()) > window]
    name = f"{task.config.task} ({task.config_source})"
    _check_last_words(task, name, wordless)
    if duplicated:
        log.warning(
            "%s: %s duplicate options (%s); identical options score alike and the "
            "lowest-index tie rule picks the first copy, so a copy of the gold option wins or "
            "loses for free. Check the data or doc_to_choice.",
            name,
            _documents(len(duplicated)),
            _first(duplicated),
        )
    if normalized:
        log.warning(
            "%s: %s options that differ only in Unicode normalization (%s, NFC and NFD forms "
            "of one text): they look alike but are different text to the model, and Char "
            "counts their characters differently. Normalize the data (unicodedata.normalize).",
            name,
            _documents(len(normalized)),
            _first(normalized),
        )
    _warn_answer_giving_premises(task, name, answered)
    if single:
        log.warning(
            "%s: %s a single option (%s); every method counts them correct. Check the data or "
            "doc_to_choice.",
            name,
            _documents(len(single)),
            _first(single),
        )
    if counter is not None and long:
        _check_option_lengths(task, counter, long)
    return premises


# A domain premise derived by the last-word rule is refused when at least this share of the
# documents has no last word shorter than its premise: DC-PMI would tie on most of them.
NO_LAST_WORD_SHARE = 0.5
_NO_LAST_WORD = (
    "no whitespace inside it (one word, punctuation alone, or a script written without "
    "spaces, such as Chinese or Japanese), so it is its own last word"
)
_WRITE_ONE = (
    "write the domain premise instead (`domain_premise:` in the task's YAML, or "
    "--dcpmi_task TASK=PREMISE)"
)


def _check_last_words(
    task: Any, name: str, wordless: dict[str, list[tuple[int, Any, str]]]
) -> None:
    """The last-word rule (``_references.last_word``) gives a premise without whitespace
    inside it no shorter premise: the reference context is then the premise itself, and
    PMI under it scores every option 0 (the tie rule picks option 0). A derived domain
    premise is refused when most documents have none; otherwise they are named in a
    warning (their domain requests are counted by ``TIED_DOMAIN`` when built)."""
    n = len(task.eval_docs)
    for reference, docs in wordless.items():
        if reference == DOMAIN and len(docs) >= NO_LAST_WORD_SHARE * n:
            raise DCPMIConfigError(
                f"task {name}: the domain premise is each document's last word (none is "
                f"written), but the premise (doc_to_text) of {len(docs)} of {n} documents has "
                f"{_NO_LAST_WORD} ({_first(docs)}): DC-PMI would compare it with itself, score "
                f"every option 0 and pick option 0; {_WRITE_ONE}."
            )
        if reference == DOMAIN:
            what, then = "domain premise", f"; the task's `{TIED_DOMAIN}` metric counts them"
        else:
            what, then = f"reference context {reference!r}", ""
        log.warning(
            "%s: the %s is each document's last word, but the premise (doc_to_text) of %d of "
            "%d documents has %s (%s): PMI there measures the premise against itself (without "
            "few-shot examples every option scores 0 and option 0 wins%s). To score them, %s.",
            name, what, len(docs), n, _NO_LAST_WORD, _first(docs), then,
            _WRITE_ONE if reference == DOMAIN else "give it a premise of its own",
        )  # fmt: skip


def _alike(choices: list[str]) -> tuple[str, str]:
    """Two options that are one text in two Unicode normalization forms."""
    for i, one in enumerate(choices):
        for other in choices[i + 1 :]:
            if one != other and unicodedata.normalize("NFC", one) == unicodedata.normalize(
                "NFC", other
            ):
                return one, other
    raise ValueError("no such options")  # only called when two exist


def _shows_only(premise: str, choices: list[str], gold: int) -> bool:
    """The rendered premise holds the gold option's text and no other option's."""
    texts = [c.strip() for c in choices]
    if not texts[gold] or texts[gold] not in premise:
        return False
    return not any(
        t and t in premise for i, t in enumerate(texts) if i != gold and t not in texts[gold]
    )


# A premise that shows the gold option on at least this share of the documents gives the
# answer away (and on at least 2 documents: a chance hit on one is no pattern).
ANSWER_SHARE = 0.5


def _target_fields(task: Any) -> set[str]:
    """The document fields the task's target is read from."""
    target = task.config.doc_to_target
    if not isinstance(target, str):
        return set()
    if "{{" in target or "{%" in target:
        return set(jinja2.meta.find_undeclared_variables(jinja_env().parse(target)))
    return {target}


def _warn_answer_giving_premises(
    task: Any, name: str, answered: dict[str, list[tuple[int, Any, str]]]
) -> None:
    """A domain premise must not know the answer: one that reads the target's field, or
    renders the gold option (and no other) on most documents, gives it away."""
    target = _target_fields(task)
    n = len(task.eval_docs)
    for reference in task.references:
        if reference.kind != "premise" or reference.template is None:
            continue
        fields = jinja2.meta.find_undeclared_variables(jinja_env().parse(reference.template))
        read = sorted(fields & target)
        shown = answered.get(reference.name, [])
        what = "domain premise" if reference.name == "domain" else f"{reference.name} premise"
        if read:
            log.warning(
                "%s: the %s %r reads %s, the field the target is read from: a premise that "
                "depends on the answer gives it away, and DC-PMI then measures nothing. Write "
                "it from the task's wording alone.",
                name, what, reference.template, ", ".join(read),
            )  # fmt: skip
        elif len(shown) >= 2 and len(shown) >= ANSWER_SHARE * n:
            log.warning(
                "%s: the %s %r shows the gold option's text, and no other option's, on %d of "
                "%d documents (%s): it gives the answer away. Write it from the task's wording "
                "alone.",
                name, what, reference.template, len(shown), n, _first(shown),
            )  # fmt: skip


def _check_fixed_labels(
    task: Any, doc: Any, doc_id: int, choices: list[str], first: list[str] | None
) -> list[str]:
    """Contextual and batch calibration compare one option set across documents: every
    document has the first one's options, distinct, and the content-free fields."""
    how = (
        "CC and BC need a fixed label set: remove `content_free_fields:` from the task's YAML "
        "(the task then reports neither), or fix the data."
    )
    missing = [field for field in task.content_free_fields if field not in doc]
    if missing:
        fields = field_names(doc)
        raise fault(
            task,
            doc,
            doc_id,
            f"content-free field(s) {missing} are not among the document's "
            f"fields ({fields}); fix `content_free_fields:` in the task's YAML.",
        )
    if multiple_inputs(task):
        raise fault(task, doc, doc_id, f"the options are contexts, not labels. {how}")
    if len(set(choices)) < len(choices):
        raise fault(task, doc, doc_id, f"options {choices!r} repeat. {how}")
    if first is None:
        _check_content_free_prompt(task, doc, doc_id)
        for text in task.layout.content_free:  # the prompt renders with each input
            rendered(
                task,
                f"the prompt with the content-free input {text!r}",
                lambda d, text=text: task.content_free_context(d, text),
                doc,
                doc_id,
            )
        return choices
    if choices != first:
        raise fault(
            task, doc, doc_id, f"options {choices!r} differ from document 0's {first!r}. {how}"
        )
    return first


# Stands in for a field's text to see whether the prompt shows it (no data holds it).
_PROBE = "\u2063dcpmi-probe\u2063"


def _check_content_free_prompt(task: Any, doc: dict, doc_id: int) -> None:
    """Each content-free field changes the prompt (else CC would score the document's own
    prompt as "content-free"); fields the content-free prompt still shows get a warning."""

    def prompt(fields: dict) -> Any:
        return rendered(task, "doc_to_text", task.doc_to_text, fields, doc_id)

    for field in task.content_free_fields:
        if prompt({**doc, field: "N/A"}) == prompt({**doc, field: _PROBE}):
            raise fault(
                task,
                doc,
                doc_id,
                f"the content-free field {field!r} does not change the prompt (doc_to_text "
                "renders the same whatever it holds), so CC's content-free prompts would be "
                "this document's own. List in `content_free_fields:` the fields whose text the "
                f"prompt shows (the document's fields: {field_names(doc)}).",
            )
    free = content_free_doc(task, doc)
    shown = prompt(free)
    kept = []
    for field, value in doc.items():
        if field in task.content_free_fields or not isinstance(value, str):
            continue
        try:
            if task.doc_to_text({**free, field: _PROBE}) != shown:
                kept.append(field)
        except Exception:  # the prompt cannot do without the field's value: it uses it
            kept.append(field)
    if kept:
        log.warning(
            "%s (%s): the content-free prompts keep document %d's field(s) %s (the prompt "
            "shows them beside `content_free_fields: %s`), so they are not free of content. "
            "Add the fields that hold the input to `content_free_fields:`.",
            task.config.task,
            task.config_source,
            doc_id,
            ", ".join(map(repr, kept)),
            list(task.content_free_fields),
        )


def fewshot_split_warning(task: Any) -> str | None:
    """The warning when ``num_fewshot`` > 0 and no few-shot split, and lm-eval's fallback (the
        training split, else the validation split, else the test split) is the evaluation split
        itself: the examples are other documents of it, at times the document itself (lm-eval
        leaves the document out only when ``fewshot_split`` names the test split); else None.
    The task says it once."""
    shots = task.config.num_fewshot or 0
    if shots <= 0:
        return None
    config = task.config
    fewshot = config.fewshot_config  # a FewshotConfig (lm-eval 0.4.13) or a dict
    split, samples = (
        (fewshot.get("split"), fewshot.get("samples"))
        if isinstance(fewshot, dict)
        else (getattr(fewshot, "split", None), getattr(fewshot, "samples", None))
    )
    if config.fewshot_split is not None or split is not None or samples is not None:
        return None
    eval_split = config.test_split if task.has_test_docs() else config.validation_split
    pool = (
        config.training_split
        if task.has_training_docs()
        else config.validation_split
        if task.has_validation_docs()
        else config.test_split
    )
    if pool != eval_split:
        return None
    return (
        f"{config.task} ({task.config_source}): num_fewshot {shots} draws the examples from "
        f"the evaluation split {eval_split!r} itself (the task names no few-shot split): a "
        "document's examples are other documents of that split, at times the document "
        "itself. Give the examples a split of their own: `fewshot_split: <split>` in the "
        "task's YAML."
    )


def _check_option_lengths(
    task: Any, counter: TokenCounter, long: list[tuple[int, Any, int, str]]
) -> None:
    texts = list(dict.fromkeys(text for *_, text in long))
    lengths = dict(zip(texts, _n_tokens(counter, texts), strict=True))
    limit = counter.max_length + WINDOW_MARGIN
    for doc_id, doc, number, text in long:
        if lengths[text] > limit:
            what = f"option {number}" if number >= 0 else "the continuation"
            raise fault(
                task,
                doc,
                doc_id,
                f"{what} ({shown(text)}) is {lengths[text]} tokens long on its own, more than "
                f"the model's window of {counter.max_length} tokens: lm-eval cannot score it. "
                "Shorten it, or raise max_length in --model_args if the model allows.",
            )


def _n_tokens(counter: TokenCounter, texts: list[str]) -> list[int]:
    encoded = counter.tokenizer(texts, add_special_tokens=False)["input_ids"]  # one batch
    return [len(ids) for ids in encoded]
