"""A results file's documents and requests built again from the data and the installed task.

``dcpmi verify`` and ``dcpmi merge`` never trust what a samples file says was scored: they
build the task as ``dcpmi run`` builds it (a ``TaskManager`` with the plugin's tasks, the
run's model arguments as metadata, the data folder at hand), then its requests for the
logged documents as lm-eval built them for the run (``_harness._requests``: few-shot count
and seed, system instruction, chat template, as the results file records them). What the
samples log is then compared with what is built: each request's context and continuation,
the target, lm-eval's three per-document hashes, the split's size and the data files read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from lm_eval_dcpmi._harness import (
    BuildOptions,
    build_requests,
    doc_hash,
    hf_chat_template,
    text_hash,
)
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.task import (
    DCPMI_TASK_KEY,
    DERIVED_SUFFIX,
    document_choices,
    gold_index,
    parse_dcpmi_task,
    write_derived_tasks,
)


@dataclass(frozen=True)
class RebuiltDocument:
    """One document of the split and its requests, as the run built them."""

    doc_id: int
    doc: Any
    target: Any  # the task's doc_to_target, as lm-eval logs it
    arguments: list[tuple[str, str]]  # (context, continuation) per request, in order
    gold: int  # the gold option's index, as the task decides it (doc_to_text for several inputs)
    choices: list[str]  # doc_to_choice: the options (the contexts, for several inputs)

    @property
    def hashes(self) -> dict[str, str]:
        """lm-eval's ``doc_hash``, ``prompt_hash`` and ``target_hash`` of the document."""
        return {
            "doc_hash": doc_hash(self.doc),
            "prompt_hash": text_hash(self.arguments[0][0]),
            "target_hash": text_hash(self.target),
        }


@dataclass
class RebuiltTask:
    """A task built again: its split's size, the data files it read, the documents asked."""

    name: str
    documents: int  # in the evaluation split
    data_files: dict[str, str]  # file -> sha256, as the task records them
    by_id: dict[int, RebuiltDocument]
    task: Any  # the built lm-eval task


@functools.lru_cache(maxsize=4)
def _manager(metadata_json: str, include_path: tuple[str, ...]) -> Any:
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_path) or None, metadata=json.loads(metadata_json))


def build_options(data: dict[str, Any], task: str, tokenizer: Any) -> BuildOptions:
    """How the run built ``task``'s requests, from its results dict; ``tokenizer`` (a
    callable giving the tokenizer) applies a recorded chat template."""
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    shots = (data.get("n-shot") or {}).get(task) if isinstance(data.get("n-shot"), dict) else None
    template = data.get("chat_template")
    seed = config.get("fewshot_seed")
    for key in ("system_instruction", "chat_template"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            raise DCPMIError(f"its {key} is {data[key]!r}, not text; not a file lm-eval wrote")
    if template:
        template = own_chat_template(tokenizer(), template)
    return BuildOptions(
        num_fewshot=int(shots)
        if isinstance(shots, (int, str)) and str(shots).isdecimal()
        else None,
        fewshot_seed=int(seed) if isinstance(seed, int) else None,
        system_instruction=data.get("system_instruction") or None,
        chat_template=hf_chat_template(tokenizer(), template) if template else None,
        fewshot_as_multiturn=bool(data.get("fewshot_as_multiturn")),
    )


def own_chat_template(tokenizer: Any, recorded: str) -> str:
    """``recorded`` (the chat template a results file records) when it is one of the
    tokenizer's own, as every run records it; a ``DCPMIError`` otherwise. A template is code
    (Jinja): one read from a stranger's file is never rendered, even in transformers'
    sandbox, where it could still stall the process (``{{ 9**(9**9) }}``) or read files
    (``{% include %}``)."""
    own = getattr(tokenizer, "chat_template", None)
    templates = list(own.values()) if isinstance(own, dict) else [own]
    if recorded not in templates:
        raise DCPMIError(
            "its recorded chat_template is not the tokenizer's own (nor one of its named "
            "templates); verify renders only the tokenizer's templates, never one read from "
            "a file: name the run's tokenizer with --tokenizer"
        )
    return recorded


@contextlib.contextmanager
def option_variant(name: str, recorded: Mapping[str, Any]) -> Iterator[tuple[str, ...]]:
    """For a task ``dcpmi run --dcpmi_task`` made (its recorded metadata names the option),
    the folder of its YAML, written again from that option for the block; else ()."""
    option = recorded.get(DCPMI_TASK_KEY)
    if option is None:
        yield ()
        return
    base, premise = parse_dcpmi_task(str(option))
    if base + DERIVED_SUFFIX != name:
        raise DCPMIError(
            f"{name}: its results record --dcpmi_task {option!r}, whose variant is "
            f"{base + DERIVED_SUFFIX}, not {name}."
        )
    with tempfile.TemporaryDirectory(prefix="dcpmi_verify_") as folder:
        write_derived_tasks([(base, premise)], Path(folder))
        yield (folder,)


def rebuild_task(
    name: str,
    metadata: dict[str, Any],
    options: BuildOptions,
    doc_ids: Sequence[int] | None,
    data_dir: str | None = None,
    include_path: Sequence[str] = (),
    recorded: Mapping[str, Any] | None = None,
) -> RebuiltTask:
    """``name`` built again with ``metadata`` (the run's model arguments: its tokenizer
    counts tokens), ``data_dir`` (else ``$DCPMI_DATA_DIR``), and its requests for
    ``doc_ids`` (sorted split indices; None: every document). ``recorded``: the task's
    metadata in the results; a ``--dcpmi_task`` variant's YAML is written again from the
    option it names. A ``DCPMIError`` when the task cannot be built here (not installed,
    no data)."""
    with option_variant(name, recorded or {}) as variant:
        return _rebuild(name, metadata, options, doc_ids, data_dir, (*include_path, *variant))


def _rebuild(
    name: str,
    metadata: dict[str, Any],
    options: BuildOptions,
    doc_ids: Sequence[int] | None,
    data_dir: str | None,
    include_path: Sequence[str],
) -> RebuiltTask:
    task = built_task(name, metadata, data_dir, include_path)
    documents = len(task.eval_docs)
    beyond = [i for i in doc_ids or () if not 0 <= i < documents]
    if beyond:
        raise DCPMIError(
            f"{name}: the samples log document {beyond[0]}, but the split built here has "
            f"{documents} documents (0-{documents - 1})."
        )
    try:
        built = build_requests(task, doc_ids, options)
    except jinja2.TemplateError as error:  # the recorded chat template (a sandboxed one)
        raise DCPMIError(
            f"{name}: its recorded chat_template cannot be rendered here "
            f"({type(error).__name__}: {error}); no run used it."
        ) from None
    except (ValueError, AssertionError) as error:
        if not options.num_fewshot:
            raise
        # lm-eval's sampler: random.sample's ValueError, or its own assertions; a run with
        # this n-shot would have ended the same way, so no run wrote it
        raise DCPMIError(
            f"{name}: its n-shot records {options.num_fewshot} examples a document, which "
            f"lm-eval cannot draw from the task's few-shot documents ({error}); no run "
            "used that n-shot."
        ) from None
    by_id = {}
    for doc_id, instances in built.items():
        doc = instances[0].doc
        arguments = [(str(i.arguments[0]), str(i.arguments[1])) for i in instances]
        # the target as each release's evaluator logs it: its task's doc_to_target
        choices = document_choices(task, doc, doc_id)
        gold = gold_index(task, doc, doc_id, choices)
        target = task.doc_to_target(doc)
        by_id[doc_id] = RebuiltDocument(doc_id, doc, target, arguments, gold, choices)
    files = (task.config.metadata or {}).get("data_files") or {}
    return RebuiltTask(name, documents, dict(files), by_id, task)


def built_task(
    name: str, metadata: dict[str, Any], data_dir: str | None, include_path: Sequence[str]
) -> Any:
    """The task ``name`` built here as ``dcpmi run`` builds it (its data read and every
    document checked; see ``rebuild_task``); a ``DCPMIError`` when it cannot be."""
    from lm_eval_dcpmi._harness import UnknownTask, load_tasks, not_found

    folder = data_dir or os.environ.get("DCPMI_DATA_DIR")
    metadata = {**metadata, **({"data_dir": str(Path(folder).resolve())} if folder else {})}
    manager = _manager(json.dumps(metadata, sort_keys=True, default=str), tuple(include_path))
    _check_dcpmi_task(manager, name)
    try:
        task = load_tasks(manager, [name])[name]
    except UnknownTask:
        raise _not_installed(name) from None
    except ValueError as error:  # lm-eval 0.4: "Tasks not found: ..."
        if not_found(error) is None:
            raise
        raise _not_installed(name) from None
    return task


def _not_installed(name: str) -> DCPMIError:
    return DCPMIError(
        f"{name}: not a task installed here, so its documents and requests cannot be built "
        "again; give the folder of its YAML with --include_path."
    )


def _check_dcpmi_task(manager: Any, name: str) -> None:
    """``name`` (read from a submitted file) must be a DC-PMI task in ``manager``'s index
    before anything builds it: lm-eval takes a name it does not know for a YAML path
    (whose templates and ``!function`` tags it would run), and builds a group's every
    member (downloading their data)."""
    from lm_eval_dcpmi._harness import indexed_entry

    found = indexed_entry(manager, name)
    if found is None:
        raise _not_installed(name)
    kind, config = found
    if kind not in ("task", "python task"):
        raise DCPMIError(
            f"{name}: a {kind} here, not one task; a results entry with a domain premise is "
            "one DC-PMI task, so this one was not written by a run of the task installed here."
        )
    if not any(key in config for key in ("domain_premise", "base_task")):
        raise DCPMIError(
            f"{name}: the task installed here is no DC-PMI task (its YAML has neither "
            "domain_premise nor base_task), so it cannot have written this DC-PMI entry."
        )
