"""A task's requests built again as a run built them, for ``dcpmi verify`` and ``merge``.

``build_requests`` mirrors what lm-eval does to a loaded task before scoring it:
``simple_evaluate``'s per-task set-up (``lm_eval/evaluator.py``: the number of few-shot
examples, ``set_fewshot_seed(seed=fewshot_random_seed)``) and ``evaluate``'s
``task.build_all_requests(limit=, samples=, rank=0, world_size=1, system_instruction=,
apply_chat_template=, fewshot_as_multiturn=, chat_template=)``; then it names each
document by its index in the split, as the samples file does.

Where the releases differ: with ``samples``, 0.4's ``Task.doc_iterator`` numbers the chosen
documents 0, 1, ... (the evaluator logs ``indices[doc_id]``); 0.5.0.dev1's yields their
indices in the split. 0.5.0.dev1 sets the few-shot count with ``set_num_fewshot``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_dcpmi._harness._configurable_task import release_05


@dataclass(frozen=True)
class BuildOptions:
    """What a results file records of how its requests were built."""

    num_fewshot: int | None = None
    fewshot_seed: int | None = None
    system_instruction: str | None = None
    chat_template: Callable[..., str] | None = None  # applies the model's chat template
    fewshot_as_multiturn: bool = False


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc_hash(doc: Any) -> str:
    """lm-eval's ``doc_hash`` of a sample (``lm_eval/evaluator.py``: the document as
    ``json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)``)."""
    from lm_eval.utils import handle_non_serializable

    return _hash(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False))


def text_hash(text: Any) -> str:
    """lm-eval's ``prompt_hash`` (of the first request's context) and ``target_hash`` (of
    ``str(target)``): ``hash_string``, a sha256 of the text."""
    return _hash(str(text))


def build_requests(
    task: Any, doc_ids: Sequence[int] | None, options: BuildOptions
) -> dict[int, list[Any]]:
    """``task``'s requests for the documents ``doc_ids`` (sorted indices in its split;
    None: every document), built as lm-eval builds them for a run (see the module's
    docstring): ``{doc index: its instances in request order}``."""
    if options.num_fewshot is not None:
        if release_05():
            task.set_num_fewshot(options.num_fewshot)
        else:
            task.set_config(key="num_fewshot", value=options.num_fewshot)
    task.set_fewshot_seed(seed=options.fewshot_seed)
    ids = list(doc_ids) if doc_ids is not None else None
    whole = ids is None or ids == list(range(len(ids)))
    # no progress bar (lm-eval's tqdm writes to sys.stderr; log handlers keep their stream)
    with contextlib.redirect_stderr(io.StringIO()):
        _build(task, ids, whole, options)
    by_doc: dict[int, list[Any]] = {}
    for instance in task.instances:
        local = instance.doc_id
        true = local if whole or release_05() else ids[local]  # type: ignore[index]
        by_doc.setdefault(true, []).append(instance)
    for instances in by_doc.values():
        instances.sort(key=lambda instance: instance.idx)
    return by_doc


def _build(task: Any, ids: list[int] | None, whole: bool, options: BuildOptions) -> None:
    task.build_all_requests(
        limit=None if ids is None else len(ids) if whole else None,
        samples=None if whole else ids,
        rank=0,
        world_size=1,
        cache_requests=False,
        system_instruction=options.system_instruction,
        apply_chat_template=options.chat_template is not None,
        fewshot_as_multiturn=options.fewshot_as_multiturn,
        chat_template=options.chat_template,
    )


def hf_chat_template(tokenizer: Any, template: str | None) -> Callable[..., str]:
    """What lm-eval's ``HFLM.apply_chat_template`` does with the model's tokenizer
    (``lm_eval/models/huggingface.py``): the chat history rendered as text, ending in the
    generation prompt; ``template``: the template the run recorded (its own, or the
    tokenizer's)."""

    import jinja2

    def render(chat_history: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
            chat_template=template,
        )

    def apply(chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        try:
            return render(chat_history, add_generation_prompt)
        except jinja2.exceptions.TemplateError:  # lm-eval's fallback: no system turn
            kept = [message for message in chat_history if message["role"] != "system"]
            return render(kept, add_generation_prompt)

    return apply
