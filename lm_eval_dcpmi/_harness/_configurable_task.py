"""lm-eval's task class as a DC-PMI task uses it beyond its public methods.

``DCPMITask`` subclasses ``task_class()`` and overrides its public methods
(``construct_requests``, ``build_all_requests``, ``doc_to_text``, ``process_results``...);
what else it needs of lm-eval's task, its requests and their answers is here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

# The logger of lm-eval's task classes (0.4: ``lm_eval/api/task.py``), where
# ``ConfigurableTask.download`` logs its advice on custom-dataset keyword arguments.
# 0.5.0.dev1: lm_eval/api/task/_task.py.
TASK_LOGGERS = ("lm_eval.api.task", "lm_eval.api.task._task")


def release_05() -> bool:
    """True on lm-eval 0.5, whose ``lm_eval.api.task`` package sets ``ConfigurableTask =
    Task`` and builds a ``MultipleChoiceTask`` for ``output_type: multiple_choice``."""
    from lm_eval.api import task

    return task.ConfigurableTask is task.Task


def task_class() -> type:
    """lm-eval's class of YAML multiple-choice tasks, which ``DCPMITask`` subclasses.

    0.4: ``lm_eval.api.task.ConfigurableTask`` (every output type in one class).
    """
    from lm_eval.api import task

    return task.MultipleChoiceTask if release_05() else task.ConfigurableTask


class _QuietCustomDatasetAdvice(logging.Filter):
    """Drops lm-eval's advice on custom_dataset kwargs for the tasks named ``prefix...``.

    0.4: ``ConfigurableTask.download`` logs ``"<task>: Custom kwargs can be passed ..."``.
    """

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.prefix) and ": Custom kwargs can be passed" in message)


def quiet_custom_dataset_advice(task_prefix: str) -> None:
    """Silence lm-eval's per-task advice on custom-dataset keyword arguments for the tasks
    whose names start with ``task_prefix``."""
    for name in TASK_LOGGERS:
        logging.getLogger(name).addFilter(_QuietCustomDatasetAdvice(task_prefix))


def multiple_inputs(task: Any) -> bool:
    """Whether the task has several inputs (the options are contexts, one continuation).

    0.4: ``ConfigurableTask.multiple_input``, the number of options when the first
    document's ``doc_to_text`` gives an int, else 0 (``ConfigurableTask.__init__``).
    """
    if hasattr(task, "_multiple_inputs"):  # 0.5.0.dev1: Task._multiple_inputs
        return bool(task._multiple_inputs)
    return bool(task.multiple_input)


@contextlib.contextmanager
def single_input(task: Any) -> Iterator[None]:
    """Within the block, lm-eval's prompt builder treats ``task`` as having one input
    (``ConfigurableTask.fewshot_context`` reads ``multiple_input``, 0.4)."""
    name = "_multiple_inputs" if hasattr(task, "_multiple_inputs") else "multiple_input"
    saved = getattr(task, name)
    setattr(task, name, False if name == "_multiple_inputs" else 0)
    try:
        yield
    finally:
        setattr(task, name, saved)


def prompt_with_text(task: Any, doc: Any, text: str, **options: Any) -> Any:
    """lm-eval's zero-shot prompt for ``doc`` with ``text`` in the place of the document's
    own text: what ``fewshot_context`` builds around it (system instruction, description,
    chat template, ``gen_prefix``), with the options ``fewshot_context`` takes.

    0.4 and 0.5.0.dev1: ``ConfigurableTask.fewshot_context`` takes the document's text
    from ``self.doc_to_text(doc)`` only (and, for several inputs, the option contexts; it
    reads ``multiple_input``): for this call the task's ``doc_to_text`` gives ``text`` and
    the task has one input.
    """

    def doc_to_text(doc: Any, doc_to_text: Any = None) -> Any:
        return text if doc_to_text is None else type(task).doc_to_text(task, doc, doc_to_text)

    task.doc_to_text = doc_to_text  # an instance attribute, over the class's method
    try:
        with single_input(task):
            return task.fewshot_context(
                doc, num_fewshot=0, gen_prefix=gen_prefix(task, doc), **options
            )
    finally:
        del task.doc_to_text


def gen_prefix(task: Any, doc: Any) -> Any:
    """The rendered ``gen_prefix`` of ``doc``, as lm-eval passes it to ``fewshot_context``.

    0.4: ``ConfigurableTask.doc_to_prefix`` (``lm_eval/api/task.py``).
    """
    if hasattr(task, "doc_to_prefix"):
        return task.doc_to_prefix(doc)
    return task._resolve_field(doc, task.config.gen_prefix)  # 0.5.0.dev1


def loglikelihood_request(
    like: Any, doc: Any, arguments: tuple, idx: int, build_options: Mapping[str, Any]
) -> Any:
    """A loglikelihood request (an lm-eval ``Instance``) of ``doc`` with ``arguments`` and
    index ``idx``, as ``ConfigurableTask.construct_requests`` builds its own from the
    keyword arguments it is given (``build_options``: ``metadata``, and the chat options
    it does not pass on).

    0.4: ``Instance(request_type, doc, arguments, idx, **kwargs)`` with ``kwargs`` less
    ``apply_chat_template`` and ``chat_template`` (``lm_eval/api/task.py``). 0.5.0.dev1:
    ``Instance`` takes ``task_name``, ``doc_id`` and ``repeats`` as fields, a dict
    ``metadata`` and a ``target``: the new request copies ``like``, the document's
    conditional request as ``MultipleChoiceTask.construct_requests`` built it.
    """
    from lm_eval.api.instance import Instance

    if release_05():
        metadata = like.metadata
        return dataclasses.replace(
            like,
            arguments=arguments,
            idx=idx,
            resps=[],
            filtered_resps={},
            metadata=dict(metadata) if isinstance(metadata, dict) else metadata,
        )

    kwargs = {
        k: v for k, v in build_options.items() if k not in ("apply_chat_template", "chat_template")
    }
    return Instance(request_type="loglikelihood", doc=doc, arguments=arguments, idx=idx, **kwargs)


def loglikelihood_answer(request: Any) -> float:
    """The loglikelihood the model gave an answered request (an lm-eval ``Instance``).

    0.4: ``Instance.resps``, one ``(loglikelihood, is_greedy)`` per repeat (one).
    """
    return float(request.resps[0][0])


def fewshot_random(task: Any) -> Any:
    """The random generator the task's few-shot sampler draws examples with (None when
    the task has none).

    0.4: ``ConfigurableTask.sampler.rnd`` (``lm_eval/api/samplers.py``,
    ``ContextSampler.rnd``, a ``random.Random``).
    """
    return getattr(getattr(task, "sampler", None), "rnd", None)


def own_metrics(
    task: Any,
    doc: Any,
    results: list[tuple[float, bool]],
    conditional: Sequence[Any],
    process_results: Callable[[Any, list], Any],
    skip: Collection[str] = (),
) -> dict[str, Any]:
    """lm-eval's own per-document metrics of the task's conditional requests (``conditional``,
    lm-eval ``Instance`` objects in option order; ``results`` their answers), those named in
    ``skip`` (the plugin's own) left out on 0.5.

    0.4: ``ConfigurableTask.process_results`` (``lm_eval/api/task.py``), given as
    ``process_results`` (the parent class's, bound to the task), computes them itself.
    0.5.0.dev1: ``Task.process_results`` returns None unless the config has
    ``process_results:``, and the task's scorers compute them: this mirrors
    ``LLScorer.score_doc`` (``lm_eval/scorers/_base.py``): ``LLResults.from_instances`` of
    the conditional requests, each metric's ``compute`` as ``Scorer._dispatch_metrics``
    calls it.
    """
    if not release_05():
        return process_results(doc, results)
    if callable(task.config.process_results):
        own = process_results(doc, results) or {}
        return {name: value for name, value in own.items() if name not in skip}
    found: dict[str, Any] = {}
    for scorer in task.scorers:
        predictions = _ll_results(conditional, results, scorer.name)
        for metric in scorer.metrics or []:
            if metric.name in skip or metric.name in found:
                continue
            score = metric.compute(predictions.targets, predictions, **scorer.context)
            found.update(score if isinstance(score, dict) else {metric.name: score})
    return found


def _ll_results(conditional: Sequence[Any], results: list[tuple[float, bool]], name: str) -> Any:
    """0.5.0.dev1's ``LLResults`` of one document's conditional requests: from the
    instances' filtered responses as lm-eval's evaluator leaves them
    (``LLResults.from_instances``, ``lm_eval/api/metrics/results.py``), or, where no
    evaluator filtered them (``process_results`` called directly), from ``results``, as
    ``from_instances`` builds it (one repeat per request)."""
    import numpy as np
    from lm_eval.api.metrics.results import LLResults

    if all(name in (getattr(i, "filtered_resps", None) or {}) for i in conditional):
        return LLResults.from_instances(list(conditional), name)
    return LLResults(
        results=[[answer] for answer in results],
        lls=np.array([ll for ll, _ in results]),
        is_greedy=[greedy for _, greedy in results],
        ctx=conditional[0].args[0],
        targets=conditional[0].target,
        choices=[instance.args[1] for instance in conditional],
    )


def unsupported_task_form(task: Any) -> str | None:
    """Why this lm-eval release cannot build the task's prompts (None: it can).

    0.4 detects several inputs from ``doc_to_text`` giving the gold index
    (``ConfigurableTask.__init__``). 0.5.0.dev1 needs ``multiple_inputs: true`` and another
    shape (``doc_to_text`` gives the contexts, ``doc_to_choice`` one continuation:
    ``MultipleChoiceTask.construct_requests``), and asserts a string prompt otherwise
    (``Task.fewshot_context``).
    """
    if not release_05() or task._multiple_inputs or not len(task.eval_docs):
        return None
    text = task.doc_to_text(task.eval_docs[0])
    if isinstance(text, int) or (isinstance(text, str) and text.isdecimal()):
        return (
            "its doc_to_text gives an option index (lm-eval 0.4's multiple-input form), which "
            "lm-eval 0.5.0.dev1 does not build (it wants `multiple_inputs: true` and another "
            "shape); run it with lm-eval 0.4.13."
        )
    return None


def document_metrics(values: dict[str, Any]) -> dict[str, Any]:
    """A document's metrics as ``process_results`` returns them to lm-eval.

    0.4: as they are (``ConfigurableTask.process_results``' dict, one value per metric).
    0.5.0.dev1: ``Task._try_process_results`` reads a list as one value per repeat
    (``normalize_to_list``, ``lm_eval/api/_utils.py``), so a value that is itself a list
    (``acc_bc``'s per-document item) is wrapped as the one repeat's value.
    """
    if not release_05():
        return values
    return {name: [value] if isinstance(value, list) else value for name, value in values.items()}


def raw_target(task: Any, doc: Any) -> Any:
    """The document's target as its ``doc_to_target`` gives it (an index or an option's
    text), before lm-eval looks it up among the options.

    0.4: ``ConfigurableTask.doc_to_target`` (``lm_eval/api/task.py``) gives it as is.
    0.5.0.dev1: ``MultipleChoiceTask.doc_to_target`` (``lm_eval/api/task/_ll.py``) turns it
    into an index (None, with a warning, when it is no option); its parent
    ``Task.doc_to_target`` (``lm_eval/api/task/_task.py``) gives it as is.
    """
    if release_05():
        from lm_eval.api.task import Task

        return Task.doc_to_target(task, doc)
    return task.doc_to_target(doc)
