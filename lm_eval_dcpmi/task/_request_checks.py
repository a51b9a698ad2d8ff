"""Checks of a DC-PMI task's requests when they are built, before the model scores any:
each request's exact token counts (``check_token_counts``) and, when lm-eval read the
requests from its request cache, that they are the very requests the task builds now
(``check_cached_requests``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lm_eval.api.instance import Instance

from lm_eval_dcpmi.errors import DCPMIConfigError
from lm_eval_dcpmi.task._rendering import fault, shown

STALE_CACHE = (
    "lm-eval read stale requests from its request cache (its key ignores the task's config, "
    "the data and --samples). Rerun once with `--cache_requests refresh`."
)


def check_token_counts(
    task: Any,
    doc: Any,
    doc_id: int,
    requests: Sequence[Instance],
    counts: Sequence[tuple[int, int]],
    max_length: int,
    n_options: int,
    carrier: bool,
) -> None:
    """What lm-eval's HF models assert of every request (``HFLM._loglikelihood_tokens``):
    a context and a continuation of at least one token, a continuation of at most
    ``max_length`` tokens, counted as ``TemplateLM._encode_pair`` splits the pair."""
    for kind, option_index, (request, (n_context, n_continuation)) in task.layout.labelled(
        list(zip(requests, counts, strict=True)), n_options, carrier
    ):
        context, continuation = request.arguments[:2]
        option = f"option {option_index} ({shown(continuation)})"
        if n_continuation > max_length:
            problem = (
                f"is {n_continuation} tokens long in its {kind} request, more than the model's "
                f"window of {max_length} tokens: lm-eval cannot score it. Shorten it, or raise "
                "max_length in --model_args if the model allows."
            )
        elif n_continuation < 1:
            problem = f"has no tokens in its {kind} request, after {shown(context[-60:])}."
        elif n_context < 1:
            problem = (
                f"follows a {kind} context without tokens ({shown(context)}, once its trailing "
                "whitespace moves to the option): give the premise some text."
            )
        else:
            continue
        raise fault(task, doc, doc_id, f"{option} {problem}")


def _by_doc(instances: Sequence[Instance]) -> dict[int, list[Instance]]:
    grouped: dict[int, list[Instance]] = {}
    for instance in instances:
        grouped.setdefault(instance.doc_id, []).append(instance)
    for group in grouped.values():
        group.sort(key=lambda instance: instance.idx)
    return grouped


def _doc_key(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


def _around_difference(text: str, other: str, limit: int = 80) -> str:
    """``text`` shown whole when short, else around its first difference from ``other``."""
    if len(text) <= limit:
        return repr(text)
    pairs = enumerate(zip(text, other, strict=False))
    start = max(0, next((i for i, (a, b) in pairs if a != b), len(other)) - limit // 3)
    shown = text[start : start + limit]
    return ("..." if start else "") + repr(shown) + ("..." if start + limit < len(text) else "")


def check_cached_requests(task: Any, cached: Sequence[Instance], built: Sequence[Instance]) -> None:
    """The requests lm-eval read from its cache must equal, string for string, those the
    task builds now: the cache's key is the task's name, shots and template flags only."""
    old, new = _by_doc(cached), _by_doc(built)
    if sorted(old) != sorted(new):
        raise DCPMIConfigError(
            f"task {task.config.task} ({task.config_source}): the request cache holds requests for "
            f"{len(old)} documents, this run evaluates {len(new)}: {STALE_CACHE}"
        )
    for doc_id in sorted(new):
        doc = new[doc_id][0].doc
        if _doc_key(old[doc_id][0].doc) != _doc_key(doc):
            raise fault(
                task, doc, doc_id, f"the cached requests are another document's: {STALE_CACHE}"
            )
        if len(old[doc_id]) != len(new[doc_id]):
            raise fault(
                task,
                doc,
                doc_id,
                f"the cache holds {len(old[doc_id])} requests, the task builds "
                f"{len(new[doc_id])} now: {STALE_CACHE}",
            )
        n_options, carrier = task.layout.n_options([r.arguments[1] for r in new[doc_id]])
        pairs = list(zip(old[doc_id], new[doc_id], strict=True))
        for kind, _option, (was, now) in task.layout.labelled(pairs, n_options, carrier):
            for part, a, b in zip(
                ("context", "continuation"), was.arguments[:2], now.arguments[:2], strict=True
            ):
                if a != b:
                    raise fault(
                        task,
                        doc,
                        doc_id,
                        f"the cached {kind} request's {part} {_around_difference(a, b)} differs "
                        f"from the one the task builds now, {_around_difference(b, a)}: "
                        + STALE_CACHE,
                    )
