"""``dcpmi tasks`` (and ``dcpmi run --tasks list``): the plugin's groups, tags and tasks,
one line each.

Read from the plugin's YAMLs (``task_configs/``), not from lm-eval's task index, so it
takes a second: a group or tag with its task count and what it is; a task with its kind
(the paper's ``mcqa`` / ``classification``, a study, a prior, a variant of lm-eval's own
task), its data file or base task and, when ``$DCPMI_DATA_DIR`` is set, the documents of
its evaluation split as the task's loader reads them. The tasks of nested groups (MMLU's
57 subjects) are counted on their group's line; ``--all`` lists them too.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi.cli._subcommand import SubCommand
from lm_eval_dcpmi.errors import DCPMIError

DATA_DIR_ENV = "DCPMI_DATA_DIR"  # data._loaders.DATA_DIR_ENV, without importing datasets
# What the plugin's groups and tags are; any other group or tag is described by its tasks.
DESCRIPTIONS: dict[str, str] = {
    paper.PAPER_GROUP: "the paper's 16 zero-shot tasks; the unweighted mean of each accuracy",
    "dcpmi_mcqa": "the paper's multiple-choice QA and completion tasks",
    "dcpmi_classification": "the paper's classification tasks",
    "dcpmi_priors": "the priors study: the 16 tasks under four priors (docs/studies.md)",
    "dcpmi_lm_eval": "DC-PMI variants of lm-eval's own tasks (lm-eval's data and prompts)",
    "dcpmi_priors_tasks": "the priors study's tasks, without dcpmi_priors' means",
    "mmlu_dcpmi": "lm-eval's MMLU with DC-PMI, one task per subject",
    **paper.STUDIES,
}
KIND_OF_TAG = {**paper.KINDS, "dcpmi_priors_tasks": "prior"}


@dataclass
class Entry:
    """A task, group or tag of the plugin."""

    name: str
    kind: str  # "group", "tag", or a task's kind
    config: dict[str, Any] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)  # groups and tags: their tasks


def _with_includes(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A YAML with its ``include:`` chain resolved as lm-eval resolves it (the file's own
    keys win)."""
    if path in seen:
        raise DCPMIError(f"{path}: includes itself through {', '.join(map(str, seen))}")
    config = paper.load_yaml(path)
    included = config.pop("include", None)
    if not isinstance(included, str):
        return config
    return {**_with_includes(path.parent / included, (*seen, path)), **config}


def plugin_entries(folder: Path | None = None) -> dict[str, Entry]:
    """Every task, group and tag of the plugin's YAMLs under ``folder`` (default: the
    plugin's ``task_configs``), by name."""
    folder = folder or task_configs_dir()
    entries: dict[str, Entry] = {}
    for path in sorted(folder.rglob("*.yaml")):
        config = _with_includes(path)
        if isinstance(config.get("group"), str):
            members = [m if isinstance(m, str) else str(m.get("task")) for m in config["task"]]
            entries[config["group"]] = Entry(config["group"], "group", config, members)
        elif isinstance(config.get("task"), str):
            tags = config.get("tag") or []
            for tag in [tags] if isinstance(tags, str) else tags:
                entries.setdefault(tag, Entry(tag, "tag")).members.append(config["task"])
            entries[config["task"]] = Entry(config["task"], _task_kind(config), config)
    return entries


def _task_kind(config: Mapping[str, Any]) -> str:
    tags = config.get("tag") or []
    for tag in [tags] if isinstance(tags, str) else tags:
        if tag in KIND_OF_TAG:
            return KIND_OF_TAG[tag]
    if config.get("base_task"):
        return "lm-eval variant"
    return "study"  # the paper's studies: templates, four-shot, COPA Flipped


def leaves(name: str, entries: Mapping[str, Entry]) -> list[str]:
    """The tasks a group or tag runs (nested groups and tags expanded), each once."""
    found: list[str] = []
    for member in entries[name].members:
        inner = entries.get(member)
        more = leaves(member, entries) if inner and inner.kind in ("group", "tag") else [member]
        found += [task for task in more if task not in found]
    return found


def documents(entry: Entry, data_dir: str) -> str:
    """The documents of the task's evaluation split, read by its own loader from
    ``data_dir``; ``?`` with the reason when they cannot be read."""
    function = str(entry.config.get("custom_dataset", ""))
    module, _, name = function.rpartition(".")
    if not module.startswith("lm_eval_dcpmi"):
        return ""
    kwargs = dict(entry.config.get("dataset_kwargs") or {})
    try:
        dataset = getattr(importlib.import_module(module), name)(**kwargs, data_dir=data_dir)
    except DCPMIError as error:
        return f"? ({' '.join(str(error).split())[:60]}...)"
    return str(len(dataset[entry.config.get("test_split", "test")]))


def _source(entry: Entry) -> str:
    kwargs = entry.config.get("dataset_kwargs") or {}
    if entry.config.get("base_task"):
        return f"lm-eval's {entry.config['base_task']}"
    return str(kwargs.get("file", ""))


def lines(show_all: bool = False, data_dir: str | None = None) -> Iterator[str]:
    """The listing, a line per group, tag and task (see the module's docstring)."""
    entries = plugin_entries()
    nested = {m for e in entries.values() if e.kind == "group" for m in e.members}
    groups = [
        e
        for e in entries.values()
        if e.kind in ("group", "tag") and (e.name not in nested or e.name in DESCRIPTIONS)
    ]
    listed = {g.name for g in groups}
    hidden = {
        t
        for e in entries.values()
        if e.kind in ("group", "tag") and e.name not in listed
        for t in leaves(e.name, entries)
    }
    hidden -= {t for g in groups for t in g.members}  # a listed group's own tasks stay
    order = {name: i for i, name in enumerate(paper.paper_order())}
    tasks = sorted(
        (e for e in entries.values() if e.kind not in ("group", "tag")),
        key=lambda e: (e.name not in order, order.get(e.name, 0), e.kind, _natural(e.name)),
    )
    if not show_all:
        tasks = [t for t in tasks if t.name not in hidden]
    width = max(len(e.name) for e in [*groups, *tasks]) + 2

    yield "Groups and tags (`--tasks NAME` runs all their tasks):"
    for group in sorted(groups, key=lambda g: (g.name != paper.PAPER_GROUP, g.kind, g.name)):
        count = len(leaves(group.name, entries))
        what = DESCRIPTIONS.get(group.name, f"{', '.join(group.members[:3])}, ...")
        yield f"  {group.name:<{width}}{group.kind:<6}{count:>4} tasks  {what}"
    counted = f"documents in the split, from ${DATA_DIR_ENV}={data_dir}" if data_dir else None
    yield ""
    yield f"Tasks (name, kind, {counted or 'data file'}{', data file' if counted else ''}):"
    for task in tasks:
        count = documents(task, data_dir) if data_dir else ""
        yield f"  {task.name:<{width}}{task.kind:<16}{count:>6}  {_source(task)}".rstrip()
    if hidden and not show_all:
        yield f"  ... and {len(hidden)} tasks of nested groups (MMLU's subjects): dcpmi tasks --all"
    if not data_dir:
        yield f"(Set {DATA_DIR_ENV}, e.g. to ../shared/data, to count each split's documents.)"


def _natural(name: str) -> tuple[str, int]:
    """``dcpmi_sst2_v2`` before ``dcpmi_sst2_v10``."""
    stem = name.rstrip("0123456789")
    return (stem, int(name[len(stem) :] or -1))


class Tasks(SubCommand):
    name = "tasks"
    help = "the plugin's groups, tags and tasks, one line each"
    description = __doc__.split("\n\n")[0]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--all", action="store_true", help="list the tasks of nested groups")

    def run(self, args: argparse.Namespace) -> int:
        print_listing(show_all=args.all)
        return 0


def print_listing(show_all: bool = False) -> None:
    """The listing on stdout; a reader that stops early (``| head``) is no error."""
    try:
        for line in lines(show_all, os.environ.get(DATA_DIR_ENV) or None):
            print(line, flush=False)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
