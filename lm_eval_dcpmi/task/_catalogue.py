"""The catalogue sweep: ``--dcpmi_task TASK`` (the last-word premise) on every
multiple-choice task of the installed lm-eval's index, from its config alone.

Each task goes the way ``dcpmi run --dcpmi_task TASK`` takes it: the YAML that
``write_derived_tasks`` writes, read back with lm-eval's loader (the ``!function`` class
resolved) and given ``metadata.config_source`` as lm-eval's task factory gives it, then
built as a ``DCPMITask``, up to its first read of the data: ``with_base_task`` (the base's
full config, the checks on it), the reference contexts and content-free fields, the metric
list, the premise templates compiled, and lm-eval's own ``TaskConfig`` and metric
registry (0.4: ``ConfigurableTask.__init__`` before ``download``; 0.5.0.dev1: all of
``Task.__init__``, which reads no data). The build stops where the task would download its
dataset (``_UpToData.download``): what the documents decide (the checks of
``_document_checks``, 0.4's several inputs, a premise with no last word) is not seen here.

Each task is **ready** (built up to the data), **refused** (a ``DCPMIError``: the one line
a user would see) or an **error** (anything else: a bug of the plugin's, to fix).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib.metadata
import inspect
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import entry_yaml, indexed_entry, load_task_config
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.rules import HEADLINE
from lm_eval_dcpmi.task._dcpmi_task import DCPMITask
from lm_eval_dcpmi.task._derive import _DataReached, note_derived_yaml, write_derived_tasks
from lm_eval_dcpmi.task._premise_digest import DERIVED_KEY
from lm_eval_dcpmi.task._references import DERIVED_PREMISE

# The `evaluate` library's offline switch (an environment variable it reads on import, and
# the module attribute it sets from it).
EVALUATE_OFFLINE = "HF_EVALUATE_OFFLINE"
EXAMPLES = 5  # task names kept per count, for the record


class _UpToData(DCPMITask):
    """``DCPMITask``, stopped at its first read of the data (lm-eval calls ``download``
    then: 0.4 inside ``ConfigurableTask.__init__``, 0.5.0.dev1 from the ``dataset``
    property)."""

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        raise _DataReached(self)


@dataclass
class Outcome:
    """One task's result: ``ready``, ``refused`` (with the user's line) or ``error``."""

    task: str
    origin: str  # "lm-eval" or "plugin": whose folder holds the base task's YAML
    shapes: dict[str, str]
    status: str
    reason: str = ""  # refused: the reason's class (``reason_of``); error: the exception type
    message: str = ""  # refused or error: the message, as a user would see it


@dataclass
class Sweep:
    """Every multiple-choice task's outcome, and how long the sweep took."""

    lm_eval_version: str
    indexed_tasks: int
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def counts(self) -> dict[str, Any]:
        """The record's numbers: by status, by refusal reason, by error type, and by
        each shape's value and status; with a few example task names for each."""
        return {
            "lm_eval": self.lm_eval_version,
            "indexed_tasks": self.indexed_tasks,
            "multiple_choice": len(self.outcomes),
            "by_origin": _tally(self.outcomes, lambda o: o.origin),
            "by_status": _tally(self.outcomes, lambda o: o.status),
            "refused_by_reason": _tally(
                [o for o in self.outcomes if o.status == "refused"], lambda o: o.reason
            ),
            "errors_by_type": _tally(
                [o for o in self.outcomes if o.status == "error"], lambda o: o.reason
            ),
            "by_shape": {
                shape: {
                    value: _tally([o for o in self.outcomes if o.shapes[shape] == value],
                                  lambda o: o.status)
                    for value in sorted({o.shapes[shape] for o in self.outcomes})
                }
                for shape in SHAPES
            },
        }  # fmt: skip


def _tally(outcomes: list[Outcome], key: Any) -> dict[str, Any]:
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for outcome in outcomes:
        groups[key(outcome)].append(outcome.task)
    return {
        name: {"count": len(tasks), "examples": sorted(tasks)[:EXAMPLES]}
        for name, tasks in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    }


# ---- shapes: what a task's config is made of ----------------------------------------

SHAPES = (
    "domain_premise",
    "prompt",
    "options",
    "process_docs",
    "num_fewshot",
    "process_results",
    "several_inputs",
)


def _form(value: Any) -> str:
    """How a config field is given: absent, a list, a function, a Jinja template (``{{``
    or ``{%``), a field name (a plain string), or another value's type."""
    if value is None:
        return "none"
    if callable(value):
        return "function"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "template" if "{{" in value or "{%" in value else "field"
    return type(value).__name__


def shapes_of(config: Any) -> dict[str, str]:
    """The shape of a task's config, resolved (a dict, or lm-eval's ``TaskConfig``): its
    domain premise (the base's own, where the base is a DC-PMI task, else the last word),
    prompt (``doc_to_text``), options (``doc_to_choice``), ``process_docs``,
    ``num_fewshot``, own ``process_results``, and several inputs (lm-eval 0.5's
    ``multiple_inputs: true``; lm-eval 0.4 decides it from the first document, so a config
    alone cannot say: ``unknown`` there)."""

    def get(key: str) -> Any:
        # lm-eval 0.4.13's TaskConfig is a dataclass that subclasses an (empty) dict
        if dataclasses.is_dataclass(config):
            return getattr(config, key, None)
        return config.get(key)

    prompt = "promptsource" if get("use_prompt") else _form(get("doc_to_text"))
    several = get("multiple_inputs")
    metadata = get("metadata")
    written = get("domain_premise") or (metadata or {}).get("domain_premise")
    return {
        # a base that is a DC-PMI task keeps its written premise (with_base_task)
        "domain_premise": "written (the base's)" if written else "last word",
        "prompt": prompt,
        "options": _form(get("doc_to_choice")),
        "process_docs": "function" if callable(get("process_docs")) else "none",
        "num_fewshot": "none" if get("num_fewshot") is None else str(get("num_fewshot")),
        "process_results": "function" if callable(get("process_results")) else "none",
        "several_inputs": "declared" if several else "unknown" if several is None else "no",
    }


# ---- refusals: the reason's class, for the counts ------------------------------------

# (what the message says, the reason's name): the first that matches names it.
REASONS = (
    ("is the Python task class", "a Python task class"),
    ("has `output_type:", "not multiple choice"),
    ("metric acc_mutual_info", "acc_mutual_info in metric_list"),
    ("is a group, not one task", "a group"),
    ("is a tag, not one task", "a tag"),
    ("is not a registered task", "not a registered task"),
)


def reason_of(message: str) -> str:
    """The class of a refusal's message: for a base task that does not load, the error
    lm-eval's loader raised (less any path); else ``REASONS``; else the message itself,
    less the ``task NAME (SOURCE):`` it starts with."""
    failed = re.search(
        r" does not load \(.*?\.ya?ml\): (.*?); lm-eval cannot build the base task", message
    )
    if failed:  # paths differ by module and machine: the reason names none
        error = re.sub(r"'/[^']*'", "'<file>'", re.sub(r" \([^()]*/[^()]*\)", "", failed.group(1)))
        return "the base task does not load: " + error
    unbuilt = re.search(r" base task '.*?' either \(.*?\.ya?ml\): (.*?); fix its YAML", message)
    if unbuilt:
        return "lm-eval cannot build the base task either: " + unbuilt.group(1)
    for phrase, reason in REASONS:
        if phrase in message:
            return reason
    return re.sub(r"^task \S+ \(.*?\): ", "", message)


# ---- the sweep ------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Per-task warnings (the last-word line, lm-eval's metric defaults) would be thousands
    of lines: the outcomes say what matters. And the ``evaluate`` library offline: lm-eval
    looks up a metric marked ``hf_evaluate: true`` on the Hub when the task is built
    (``get_metric``), 1.5 s a task without network; offline it fails at once, and lm-eval
    goes on without that metric either way."""
    saved_env = os.environ.get(EVALUATE_OFFLINE)
    os.environ[EVALUATE_OFFLINE] = "1"  # read when `evaluate` is imported
    evaluate_config = sys.modules.get("evaluate.config")  # imported already: its setting
    saved_config = getattr(evaluate_config, EVALUATE_OFFLINE, None)
    if evaluate_config is not None:
        setattr(evaluate_config, EVALUATE_OFFLINE, True)
    disabled = logging.root.manager.disable
    logging.disable(max(disabled, logging.ERROR))
    try:
        yield
    finally:
        logging.disable(disabled)
        if saved_env is None:
            os.environ.pop(EVALUATE_OFFLINE)
        else:
            os.environ[EVALUATE_OFFLINE] = saved_env
        evaluate_config = sys.modules.get("evaluate.config")
        if evaluate_config is not None:
            offline = saved_config if saved_config is not None else saved_env == "1"
            setattr(evaluate_config, EVALUATE_OFFLINE, offline)


def multiple_choice_tasks(manager: Any) -> dict[str, str]:
    """The multiple-choice tasks of ``manager``'s index, by the raw config's ``output_type``
    (``Entry.cfg``: includes merged), each with its origin: ``lm-eval`` (its YAML is in
    lm-eval's task folder) or ``plugin``."""
    from lm_eval.tasks import TaskManager

    lm_eval_folder = Path(inspect.getfile(TaskManager)).resolve().parent  # lm_eval/tasks/
    found = {}
    for name in manager.all_tasks:
        kind, config = indexed_entry(manager, name) or ("", {})
        yaml_path = entry_yaml(manager, name)
        if config.get("output_type") != "multiple_choice" or yaml_path is None:
            continue
        if kind not in ("task", "python task") or name != config.get("task"):
            continue
        inside = Path(yaml_path).resolve().is_relative_to(lm_eval_folder)
        found[name] = "lm-eval" if inside else "plugin"
    return dict(sorted(found.items()))


def derive_one(name: str, folder: Path, manager: Any) -> tuple[str, str, str, Any]:
    """``--dcpmi_task NAME`` built up to the data: ``(status, reason, message, config)``,
    the config being the task's ``TaskConfig`` when it is ready."""
    (derived,) = write_derived_tasks([(name, None)], folder)
    path = folder / f"{derived}.yaml"
    config = load_task_config(path)
    # lm-eval's factory names the YAML in the config it hands the class
    # (TaskFactory._load_full_config); the base is looked up in `manager`.
    config["metadata"] = {**config.get("metadata", {}), "config_source": str(path)}
    note_derived_yaml(str(path), manager)
    task_class = config.pop("class")
    assert task_class is DCPMITask, task_class  # what write_derived_tasks writes
    try:
        _UpToData(config=config)
    except _DataReached as reached:
        task = reached.args[0]
        missing = _not_ready(task)
        if missing:
            return "error", "built incomplete", f"built, but {missing}", task.config
        return "ready", "", "", task.config
    except DCPMIError as error:
        return "refused", reason_of(str(error)), str(error), None
    except Exception as error:  # noqa: BLE001 - every other fault is the sweep's finding
        return "error", type(error).__name__, f"{type(error).__name__}: {error}", None
    return "error", "no data read", "the task was built without reading its data", None


def _not_ready(task: Any) -> str:
    """What a task built up to its data lacks of a DC-PMI task ('' for nothing): a domain
    premise in its metadata (the last word, or the base's own where the base is a DC-PMI
    task), its DC-PMI accuracy among its metrics, and each of these in lm-eval's metric
    list."""
    metadata = getattr(task.config, "metadata", None) or {}
    written = metadata.get("domain_premise")
    if (
        not (isinstance(written, str) and written)
        and metadata.get(DERIVED_KEY) != (DERIVED_PREMISE["kind"])
    ):
        return "its metadata records no domain premise, written or derived"
    ours = [metric.name for metric in task.metrics]
    listed = {entry.get("metric") for entry in getattr(task.config, "metric_list", None) or []}
    missing = [name for name in ours if name not in listed]
    if HEADLINE not in ours or missing:
        return f"its metric_list lacks {', '.join(missing or [HEADLINE])}"
    return ""


def sweep(manager: Any = None) -> Sweep:
    """``--dcpmi_task TASK`` on every multiple-choice task of ``manager``'s index (a new
    ``TaskManager``: lm-eval's tasks and the plugin's), from the config alone."""
    from lm_eval.tasks import TaskManager

    start = time.perf_counter()
    with _quiet():
        manager = manager if manager is not None else TaskManager()
        tasks = multiple_choice_tasks(manager)
        result = Sweep(importlib.metadata.version("lm-eval"), _count_tasks(manager))
        with tempfile.TemporaryDirectory(prefix="dcpmi_catalogue_") as temporary:
            for name, origin in tasks.items():
                status, reason, message, config = derive_one(name, Path(temporary), manager)
                if config is None:  # not built: the shape of the base task's raw config
                    config = _raw_config(indexed_entry(manager, name)[1])
                result.outcomes.append(
                    Outcome(name, origin, shapes_of(config), status, reason, message)
                )
    result.seconds = time.perf_counter() - start
    return result


def _raw_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The index's raw config of a task (``Entry.cfg``), its unresolved ``!function``s
    (lm-eval gives each as the path ``<folder>/<module>.<name>``) as a function, for
    ``shapes_of``: the base may not load (a module it imports is missing)."""

    def function() -> None: ...

    def unresolved(value: Any) -> bool:
        return (
            isinstance(value, str)
            and value.startswith("/")
            and Path(value.rsplit(".", 1)[0] + ".py").is_file()
        )

    return {key: function if unresolved(value) else value for key, value in raw.items()}


def _count_tasks(manager: Any) -> int:
    return sum(
        (indexed_entry(manager, name) or ("",))[0] in ("task", "python task")
        for name in manager.all_tasks
    )


# ---- the record: results/catalogue/sweep_lm-eval-<version>.{json,md} -----------------


def record_name(lm_eval_version: str) -> str:
    """The record's file name, without suffix: one per lm-eval release."""
    return f"sweep_lm-eval-{lm_eval_version}"


def markdown(counts: Mapping[str, Any], seconds: float | None = None) -> str:
    """The record as a Markdown page: counts by status, by refusal reason, by shape."""

    def examples(entry: Mapping[str, Any]) -> str:
        return ", ".join(f"`{name}`" for name in entry["examples"][:3])

    status = counts["by_status"]
    lines = [
        f"# `--dcpmi_task TASK` on lm-eval {counts['lm_eval']}'s multiple-choice catalogue",
        "",
        "Generated by `scripts/sweep_catalogue.py` (`lm_eval_dcpmi.task._catalogue`); do "
        "not edit. Every task of the index whose config says `output_type: multiple_choice` "
        "is derived as `dcpmi run --dcpmi_task TASK` derives it (the last-word premise) and "
        "built as a `DCPMITask` up to its first read of the data; see docs/custom-tasks.md "
        "for what *ready* checks and what it cannot.",
        "",
        f"Index: {counts['indexed_tasks']:,} tasks (YAML and Python); multiple choice: "
        f"{counts['multiple_choice']:,} ("
        + ", ".join(f"{v['count']:,} {k}'s" for k, v in counts["by_origin"].items())
        + ")."
        + (f" The sweep took {seconds:.0f} s." if seconds is not None else ""),
        "",
        "| outcome | tasks | e.g. |",
        "|---|---:|---|",
    ]
    for name in ("ready", "refused", "error"):
        entry = status.get(name, {"count": 0, "examples": []})
        lines.append(f"| {name} | {entry['count']:,} | {examples(entry)} |")
    lines += ["", "## Refused, by reason", ""]
    if counts["refused_by_reason"]:
        lines += ["| reason | tasks | e.g. |", "|---|---:|---|"]
        lines += [
            f"| {reason} | {entry['count']:,} | {examples(entry)} |"
            for reason, entry in counts["refused_by_reason"].items()
        ]
    else:
        lines.append("None.")
    if counts["errors_by_type"]:
        lines += ["", "## Errors, by type", "", "| type | tasks | e.g. |", "|---|---:|---|"]
        lines += [
            f"| {kind} | {entry['count']:,} | {examples(entry)} |"
            for kind, entry in counts["errors_by_type"].items()
        ]
    lines += ["", "## By shape", ""]
    lines += ["| shape | value | ready | refused | error | e.g. |", "|---|---|---:|---:|---:|---|"]
    for shape, values in counts["by_shape"].items():
        for value, by_status in values.items():
            cells = [
                str(by_status.get(s, {}).get("count", 0)) for s in ("ready", "refused", "error")
            ]
            first = next(iter(by_status.values()))
            lines.append(f"| {shape} | {value} | {' | '.join(cells)} | {examples(first)} |")
    return "\n".join(lines) + "\n"
