"""lm-eval's task class as a DC-PMI task uses it beyond its public methods.

``DCPMITask`` subclasses ``task_class()`` and overrides its public methods
(``construct_requests``, ``build_all_requests``, ``doc_to_text``, ``process_results``...);
what else it needs of lm-eval's task, its requests and their answers is here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

# The logger of lm-eval's task classes (0.4: ``lm_eval/api/task.py``), where
# ``ConfigurableTask.download`` logs its advice on custom-dataset keyword arguments.
TASK_LOGGERS = ("lm_eval.api.task",)


def task_class() -> type:
    """lm-eval's class of YAML multiple-choice tasks, which ``DCPMITask`` subclasses.

    0.4: ``lm_eval.api.task.ConfigurableTask`` (every output type in one class).
    """
    from lm_eval.api.task import ConfigurableTask

    return ConfigurableTask


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
    return bool(task.multiple_input)


@contextlib.contextmanager
def single_input(task: Any) -> Iterator[None]:
    """Within the block, lm-eval's prompt builder treats ``task`` as having one input
    (``ConfigurableTask.fewshot_context`` reads ``multiple_input``, 0.4)."""
    saved = task.multiple_input
    task.multiple_input = 0
    try:
        yield
    finally:
        task.multiple_input = saved


def gen_prefix(task: Any, doc: Any) -> Any:
    """The rendered ``gen_prefix`` of ``doc``, as lm-eval passes it to ``fewshot_context``.

    0.4: ``ConfigurableTask.doc_to_prefix`` (``lm_eval/api/task.py``).
    """
    return task.doc_to_prefix(doc)


def loglikelihood_request(
    doc: Any, arguments: tuple, idx: int, build_options: Mapping[str, Any]
) -> Any:
    """A loglikelihood request (an lm-eval ``Instance``) of ``doc`` with ``arguments`` and
    index ``idx``, as ``ConfigurableTask.construct_requests`` builds its own from the
    keyword arguments it is given (``build_options``: ``metadata``, and the chat options
    it does not pass on).

    0.4: ``Instance(request_type, doc, arguments, idx, **kwargs)`` with ``kwargs`` less
    ``apply_chat_template`` and ``chat_template`` (``lm_eval/api/task.py``).
    """
    from lm_eval.api.instance import Instance

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
