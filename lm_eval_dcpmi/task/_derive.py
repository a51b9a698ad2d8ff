"""DC-PMI on a task that is already registered, named by ``base_task``.

A derived task YAML names the base task instead of copying or including its file::

    task: arc_easy_dcpmi
    base_task: arc_easy
    class: !function lm_eval_dcpmi.task.DCPMITask
    domain_premise: "Answer:"

lm-eval 0.4.13 has no way to do this itself: ``include:`` takes a file path only, and a
group's ``{task: arc_easy, ...overrides}`` entry keeps the base task's name (so base
and variant cannot run side by side) and ignores ``class:``. ``DCPMITask`` therefore
calls ``with_base_task`` with the config lm-eval hands it, which starts from the base
task's full config, resolved as lm-eval resolves it, and lays the derived YAML's keys
over it.

Without ``domain_premise`` (in the derived YAML and in the base), each document's domain
premise is the last word of its premise (``_references.DERIVED_PREMISE``, the paper's rule),
and one line says so. ``dcpmi run --dcpmi_task TASK[=PREMISE]`` writes such a YAML
(``write_derived_tasks``); ``dcpmi verify`` writes it again from the option a results file
records.

A base task lm-eval cannot build either (its YAML's ``!function`` module does not import,
or lm-eval refuses its config before reading data: ``base_task_refusal``) is refused in
one line naming lm-eval's error; scripts/sweep_catalogue.py counts these over lm-eval's
whole catalogue (``_catalogue``).

The base task is looked up in the index of the ``TaskManager`` that indexed the derived
YAML, so that a base task from the same ``--include_path`` is found: the plugin's start-up
hook (``_autoload``) calls ``note_task_manager`` for every ``TaskManager`` built, and the
config lm-eval hands the task names its YAML file (``metadata.config_source``).
"""

from __future__ import annotations

import difflib
import logging
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lm_eval_dcpmi._harness import entry_yaml, indexed_files_with, load_task_config
from lm_eval_dcpmi._harness import task_class as lm_eval_task_class
from lm_eval_dcpmi.errors import DCPMIConfigError, DCPMIError
from lm_eval_dcpmi.task._premise_digest import derived_label
from lm_eval_dcpmi.task._references import DERIVED_PREMISE

log = logging.getLogger(__name__)

BASE_TASK_KEY = "base_task"
# Keys that place the *base* task in groups and tags (or name it in tables): the
# derived task is a different task, so it does not inherit them.
BASE_KEYS_DROPPED = ("tag", "group", "task_list", "task_alias")
# Metadata key of the YAMLs `dcpmi run --dcpmi_task TASK[=PREMISE]` writes: the option's value.
DCPMI_TASK_KEY = "dcpmi_task"
DCPMI_TASK_OPTION = "--dcpmi_task"
DERIVED_SUFFIX = "_dcpmi"

# Derived YAML file (as lm-eval names it in `metadata.config_source`) -> the TaskManager
# that indexed it last. Weak: a manager nobody holds is not kept alive for this.
_INDEXED_BY: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def note_task_manager(manager: Any) -> None:
    """Remember ``manager`` as the one whose index holds the base tasks of the derived
    YAMLs (those with ``base_task``) it indexed. Called for every new ``TaskManager``."""
    for source in indexed_files_with(manager, BASE_TASK_KEY):
        _INDEXED_BY[source] = manager


def note_derived_yaml(source: str, manager: Any) -> None:
    """Look up the base task of the derived YAML ``source`` in ``manager``'s index: for a
    YAML no manager indexed (the catalogue sweep reads the YAMLs ``write_derived_tasks``
    writes without indexing them again)."""
    _INDEXED_BY[source] = manager


def with_base_task(config: dict[str, Any], task_class: type) -> dict[str, Any]:
    """``config`` (a task config with ``base_task``) laid over the base task's config.

    The base task is looked up in the index of the ``TaskManager`` that indexed the
    derived YAML (so tasks from ``--include_path`` count), else in a fresh one. The
    derived config's keys win; ``metadata`` is merged (derived keys win, so
    ``config_source`` stays the derived YAML); the base's ``tag``, ``group``, ``task_list``
    and ``task_alias`` are dropped. A base built by ``task_class`` (another DC-PMI task)
    may be derived again. Without a ``domain_premise`` (neither config has one), the
    premise's last word is the domain premise (``_references.DERIVED_PREMISE``), and one
    line says so. Raises ``DCPMIConfigError`` naming the YAML at fault when the base is
    unknown, a group or tag, a Python task class, not multiple choice, or when the domain
    premise given is empty.
    """
    derived = dict(config)
    base_name = derived.pop(BASE_TASK_KEY)
    where = _describe(derived)
    if not isinstance(base_name, str) or not base_name:
        raise DCPMIConfigError(
            f"{where}: `{BASE_TASK_KEY}` must name a registered task, got {base_name!r}."
        )
    if base_name == derived.get("task"):
        raise DCPMIConfigError(
            f"{where}: `{BASE_TASK_KEY}: {base_name}` names this task itself; name the "
            f"registered task it is a DC-PMI variant of (e.g. `{BASE_TASK_KEY}: "
            f"{base_name.removesuffix('_dcpmi')}` for `task: {base_name}`), a task of another name."
        )
    manager, searched = _task_manager(derived)
    base = _base_config(base_name, manager, searched, where, task_class)
    merged = {**base, **derived}
    merged["metadata"] = {
        **_as_dict(base.get("metadata")),
        **_as_dict(derived.get("metadata")),
        BASE_TASK_KEY: base_name,
    }
    _check_merged(merged, derived, base_name, where, manager)
    if "domain_premise" not in merged:  # neither YAML writes one: the paper's rule
        merged["domain_premise"] = dict(DERIVED_PREMISE)
        log.warning(_derived_premise_line(merged, base_name, where))
    option = merged["metadata"].get(DCPMI_TASK_KEY)
    if option is not None:
        # `dcpmi run --dcpmi_task` wrote the YAML into a temporary folder, gone after the
        # run: results and errors name the option and the base task's YAML instead.
        base_yaml = entry_yaml(manager, base_name)
        merged["metadata"]["config_source"] = (
            f"dcpmi run --dcpmi_task {option!r}, the DC-PMI variant of {base_name} ({base_yaml})"
        )
    return merged


def _base_config(
    base_name: str, manager: Any, searched: str, where: str, task_class: type
) -> dict[str, Any]:
    """The base task's config as lm-eval builds it (includes and ``!function`` resolved)."""
    for kind, names in (("group", manager.all_groups), ("tag", manager.all_tags)):
        if base_name in names:
            raise DCPMIConfigError(
                f"{where}: base task {base_name!r} is a {kind}, not one task; derive each of "
                f"its tasks with its own `{BASE_TASK_KEY}` (and group them), or use a "
                "ready-made variant (e.g. `--tasks mmlu_dcpmi`, `--tasks dcpmi_lm_eval`)."
            )
    yaml_path = entry_yaml(manager, base_name)
    if yaml_path is None:
        close = difflib.get_close_matches(base_name, manager.all_tasks, n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} is not a registered task ({searched}).{hint} "
            "A task of your own needs its folder in --include_path."
        )
    try:
        config = load_task_config(yaml_path)
    except Exception as error:  # lm-eval's loader on the base's own YAML and modules
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} does not load ({yaml_path}): "
            f"{_first_line(error)}; lm-eval cannot build the base task itself either: fix "
            "what its YAML names (a `!function` module and what that imports) or derive "
            "another task."
        ) from error
    for key in BASE_KEYS_DROPPED:
        config.pop(key, None)
    base_class = config.pop("class", None)
    if base_class is not None and not (
        isinstance(base_class, type) and issubclass(base_class, task_class)
    ):
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} is the Python task class "
            f"{getattr(base_class, '__qualname__', base_class)!r} ({yaml_path}); DC-PMI "
            "can only be added to a YAML task (lm-eval's ConfigurableTask), whose prompt "
            "and options the config defines."
        )
    return config


class _DataReached(BaseException):
    """Raised where a task would read its data: its config built. A BaseException, so that
    no ``except Exception`` on the way takes it for a fault."""


def base_task_refusal(given: dict[str, Any], error: Exception) -> DCPMIConfigError | None:
    """The refusal when lm-eval cannot build the base task either: its own task class,
    given the base's config (the config ``given`` names by ``base_task``), fails before it
    reads any data with the same error that building the derived task raised (``error``),
    the derived task's name read as the base's. None otherwise: the derived task's own
    fault, whose error stands.

    lm-eval 0.5.0.dev1 refuses some of its own tasks' configs when it builds them (e.g.
    ``aggregation: f1``, a name it registers as a metric only): the variant of such a task
    fails the same way, and the user should learn that the base is at fault.
    """
    derived = dict(given)
    base_name = derived.pop(BASE_TASK_KEY, None)
    if not isinstance(base_name, str) or not base_name:
        return None
    where = _describe(derived)
    lm_eval_class = lm_eval_task_class()
    manager, searched = _task_manager(derived)
    try:
        base = _base_config(base_name, manager, searched, where, lm_eval_class)
    except DCPMIConfigError:
        return None  # not a plain task of lm-eval's (a DC-PMI task): no comparison
    base["metadata"] = _as_dict(base.get("metadata"))

    class UpToData(lm_eval_class):  # lm-eval's class, stopped where it would read data
        def download(self, *args: Any, **kwargs: Any) -> None:
            raise _DataReached

    try:
        UpToData(config=base)
    except _DataReached:
        return None
    except Exception as base_error:  # lm-eval's own, on the base task's own config
        names = (str(derived.get("task")), base_name)
        if type(base_error) is not type(error) or str(base_error) != str(error).replace(*names):
            return None
        return DCPMIConfigError(
            f"{where}: lm-eval cannot build the base task {base_name!r} either "
            f"({entry_yaml(manager, base_name)}): "
            f"{_first_line(base_error)}; fix its YAML or derive another task."
        )
    return None


def _first_line(error: BaseException) -> str:
    """``Type: message``, on one line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _check_merged(
    merged: dict[str, Any], derived: dict[str, Any], base_name: str, where: str, manager: Any
) -> None:
    output_type = merged.get("output_type")
    if output_type != "multiple_choice":
        if "output_type" in derived:  # the user's own YAML set it: blame that file
            raise DCPMIConfigError(
                f"{where}: `output_type: {output_type}` is set here, over the base task "
                f"{base_name!r}; DC-PMI scores the options of a `multiple_choice` task: "
                "remove the line or set `output_type: multiple_choice`."
            )
        raise DCPMIConfigError(
            f"{where}: base task {base_name!r} ({entry_yaml(manager, base_name)}) "
            f"has `output_type: {output_type}`; DC-PMI scores the options of a "
            "`multiple_choice` task."
        )
    premise = merged.get("domain_premise", DERIVED_PREMISE)
    if not (isinstance(premise, str) and premise) and premise != DERIVED_PREMISE:
        raise DCPMIConfigError(
            f"{where}: DC-PMI needs a non-empty domain premise; add a line such as "
            f'`domain_premise: "Answer:"` (ending the way {base_name!r}\'s prompt ends), or '
            "leave the line out for each document's last word (the paper's rule)."
        )


def _derived_premise_line(merged: dict[str, Any], base_name: str, where: str) -> str:
    """The one line that says a variant's domain premise is derived, and how to write one."""
    if merged["metadata"].get(DCPMI_TASK_KEY) is not None:
        instead = f"--dcpmi_task {base_name}=PREMISE"
    else:
        instead = "a `domain_premise:` line in its YAML"
    return (
        f"{where}: {derived_label(DERIVED_PREMISE['kind'])}: no domain premise is written, so each "
        "document's is the last word of its premise (the paper's rule, `{kind: last_word}`); "
        f"to write one instead, give {instead}."
    )


def _task_manager(derived: dict[str, Any]) -> tuple[Any, str]:
    """The TaskManager that indexed the derived YAML (else a fresh one), and what its
    index covers, for error messages."""
    source = _as_dict(derived.get("metadata")).get("config_source")
    manager = _INDEXED_BY.get(str(source)) if source is not None else None
    if manager is not None:
        include = manager.include_path or []
        folders = include if isinstance(include, (list, tuple)) else [include]
        return manager, "searched lm-eval's tasks and " + (
            ", ".join(str(folder) for folder in folders) or "no --include_path"
        )
    from lm_eval.tasks import TaskManager

    return TaskManager(), (
        "searched only what a new TaskManager() knows: lm-eval's tasks, and the plugin's "
        "with its autoload hook on; no TaskManager the plugin saw indexed this YAML (a "
        "config given as a dict, or the hook off), so --include_path was not searched"
    )


def _as_dict(metadata: Any) -> dict[str, Any]:
    # lm-eval keeps a non-dict `metadata:` under this key (TaskFactory._load_full_config).
    if metadata is None:
        return {}
    return dict(metadata) if isinstance(metadata, dict) else {"_metadata": metadata}


def _describe(config: dict[str, Any]) -> str:
    """``task NAME (path/to/derived.yaml)`` for error messages; for a YAML that ``dcpmi run
    --dcpmi_task`` wrote (a temporary file), the option instead."""
    metadata = _as_dict(config.get("metadata"))
    if metadata.get(DCPMI_TASK_KEY) is not None:
        source = f"dcpmi run --dcpmi_task {metadata[DCPMI_TASK_KEY]!r}"
    else:
        source = metadata.get("config_source", "its YAML")
    return f"task {config.get('task', '<unnamed>')} ({source})"


# ---- the YAMLs of `dcpmi run --dcpmi_task TASK[=PREMISE]` ----------------------------


def parse_dcpmi_task(value: str) -> tuple[str, str | None]:
    """``'arc_easy=Answer:'`` -> ``('arc_easy', 'Answer:')`` (the premise kept verbatim);
    ``'arc_easy'`` -> ``('arc_easy', None)``: each document's last word."""
    base, equals, premise = value.partition("=")
    base = base.strip()
    if not base or (equals and not premise):
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} {value!r}: expected TASK=PREMISE with a registered "
            'multiple-choice task and a non-empty domain premise, e.g. arc_easy="Answer:" '
            "(or TASK alone: each document's last word is its domain premise)."
        )
    # TASK names a file of the temporary task folder: nothing that leads out of it.
    bad = next((c for c in base if c in "/\\" or not c.isprintable()), None)
    if bad is not None or base.startswith((".", "-")):
        what = f"it holds {bad!r}" if bad is not None else f"it starts with {base[0]!r}"
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} {value!r}: {base!r} is not a task name ({what}); TASK is "
            "the name of a registered task, e.g. arc_easy (for a task of your own, give its "
            "folder with --include_path and its name here)."
        )
    return base, premise if equals else None


def option_value(base: str, premise: str | None) -> str:
    """The option's value as given: ``TASK=PREMISE``, or ``TASK`` alone."""
    return base if premise is None else f"{base}={premise}"


def derived_task_config(base: str, premise: str | None) -> dict[str, Any]:
    """The by-name DC-PMI YAML for ``base`` (written out with the function tag added),
    without ``domain_premise`` when ``premise`` is None; its metadata holds the option,
    which results and errors name as the task's source (the YAML itself is a temporary
    file)."""
    config: dict[str, Any] = {"task": base + DERIVED_SUFFIX, BASE_TASK_KEY: base}
    if premise is not None:
        config["domain_premise"] = premise
    config["metadata"] = {DCPMI_TASK_KEY: option_value(base, premise)}
    return config


def write_derived_tasks(derived: Sequence[tuple[str, str | None]], folder: Path) -> list[str]:
    """One YAML per ``(base, premise)`` in ``folder``; returns the new task names."""
    names = []
    for base, premise in derived:
        config = derived_task_config(base, premise)
        path = folder / f"{config['task']}.yaml"
        if path.resolve().parent != folder.resolve():  # parse_dcpmi_task rules this out
            raise DCPMIError(f"{DCPMI_TASK_OPTION} {base}: not a task name.")
        text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
        text += "class: !function lm_eval_dcpmi.task.DCPMITask\n"
        path.write_text(text, encoding="utf-8")
        names.append(config["task"])
    return names
