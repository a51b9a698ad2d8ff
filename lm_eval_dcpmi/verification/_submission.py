"""A results file read for a leaderboard: its model, its tasks' metrics with their standard
errors and document counts, what each task scored (premise, data digests, plugin version),
and whether the run covered whole splits."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import recorded_model_args
from lm_eval_dcpmi._identity import ModelIdentity, identify, recorded_identity
from lm_eval_dcpmi._json_files import checked_name, read_json
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.report import metric_label, samples_files
from lm_eval_dcpmi.rules import HEADLINE, metric_named
from lm_eval_dcpmi.task import derived_label, derived_rule, premise_versioned


@dataclass
class TaskEntry:
    """One task (or group) of a results file."""

    name: str
    is_group: bool
    values: dict[str, float]  # accuracy metric -> value in [0, 1]
    stderr: dict[str, float]  # accuracy metric -> lm-eval's standard error, where numeric
    # the measures it reports (PMA: rules.MEASURES), as ``values``/``stderr``; exports
    # carry accuracies only, verify checks both
    measures: dict[str, float] = field(default_factory=dict)
    measures_stderr: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    version: str | None = None
    n: int | None = None  # documents scored
    n_total: int | None = None  # documents in the split
    subtasks: list[str] = field(default_factory=list)
    samples_file: Path | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        metadata = self.config.get("metadata")
        return metadata if isinstance(metadata, dict) else {}

    def _text(self, key: str) -> str | None:
        """A text the task's metadata records; a value of another type, shown as text (it
        then matches nothing it is compared with, and is named there)."""
        value = self.metadata.get(key)
        return value if value is None or isinstance(value, str) else repr(value)

    @property
    def premise_sha256(self) -> str | None:
        return self._text("premise_sha256")

    @property
    def domain_premise(self) -> str | None:
        return self._text("domain_premise")

    @property
    def premise_rule(self) -> str | None:
        """The rule that derived each document's domain premise (none was written)."""
        return derived_rule(self.metadata)

    def metric_label(self, metric: str) -> str:
        """How exports name ``metric``: its report label, and DC-PMI under a derived
        domain premise by its rule (``'DC-PMI (last-word premise)'``)."""
        if metric == HEADLINE and self.premise_rule is not None:
            return derived_label(self.premise_rule)
        return metric_label(metric)

    @property
    def data_files(self) -> dict[str, str] | None:
        files = self.metadata.get("data_files")
        if not isinstance(files, Mapping):
            return None
        return {str(k): v if isinstance(v, str) else repr(v) for k, v in files.items()}

    @property
    def plugin_version(self) -> str | None:
        return self._text("dcpmi_version")

    @property
    def partial(self) -> bool:
        return self.n is not None and self.n_total is not None and self.n < self.n_total


@dataclass
class Submission:
    """One results file."""

    path: Path
    data: dict[str, Any]
    model: ModelIdentity
    tasks: dict[str, TaskEntry]
    task_hashes: dict[str, str]
    # entries that report a metric only the plugin computes but are no DC-PMI task or group
    # the file describes (no config with a domain premise): name -> that metric
    unverifiable: dict[str, str] = field(default_factory=dict)

    @property
    def run_config(self) -> dict[str, Any]:
        """The results file's ``config`` (how the run was made); {} where it holds none."""
        config = self.data.get("config")
        return config if isinstance(config, dict) else {}

    @property
    def limit(self) -> Any:
        return self.run_config.get("limit")

    @property
    def bootstrap_iters(self) -> Any:
        """The run's ``--bootstrap_iters`` (every release records it); None where absent."""
        return self.run_config.get("bootstrap_iters")

    @property
    def partial_tasks(self) -> list[str]:
        return [t.name for t in self.tasks.values() if not t.is_group and t.partial]

    @property
    def plugin_version(self) -> str | None:
        block = self.data.get("dcpmi")
        recorded = block.get("plugin_version") if isinstance(block, dict) else None
        versions = {t.plugin_version for t in self.tasks.values() if t.plugin_version}
        return recorded or (versions.pop() if len(versions) == 1 else None)

    def tokenizer_args(self, tokenizer: str | None) -> dict[str, Any]:
        """Model arguments that load the run's tokenizer here, and no other of the recorded
        ones (``RECORDED_TOKENIZER_ARGS``: a submitted file never asks for remote code, a
        data folder or anything else): ``tokenizer`` if given (the recorded flags kept),
        the installed embedded model for its id, else the recorded tokenizer."""
        from lm_eval_dcpmi import embedded
        from lm_eval_dcpmi._identity import EMBEDDED_ID

        args = kept_model_args(self.data, RECORDED_TOKENIZER_ARGS)
        if tokenizer:
            flags = {k: v for k, v in args.items() if k in TOKENIZER_FLAGS}
            return {**flags, "pretrained": tokenizer, "tokenizer": tokenizer}
        if self.model.id == EMBEDDED_ID and self.model.file == embedded.GGUF_FILE:
            try:
                return {**args, **embedded.model_args()}
            except embedded.EmbeddedModelMissing as error:
                raise DCPMIError(
                    f"{self.path}: the run's model is the embedded one; {error}"
                ) from None
        return args


# The recorded model arguments verify, merge and export take from a submitted file: what
# names the run's tokenizer and how it counts. Never `trust_remote_code` (code the file
# would choose), `data_dir` (a folder it would choose) or anything passed on to a loader.
TOKENIZER_FLAGS = ("use_fast_tokenizer", "add_bos_token", "max_length", "max_model_len")
RECORDED_TOKENIZER_ARGS = ("pretrained", "tokenizer", "gguf_file", "revision", "subfolder",
                           *TOKENIZER_FLAGS)  # fmt: skip


def kept_model_args(data: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The model arguments a results dict records, only ``keys`` of them, and only text
    (the command line records text; the Python API may record numbers and flags)."""
    recorded = recorded_model_args(data)
    return {
        key: str(recorded[key])
        for key in keys
        if isinstance(recorded.get(key), (str, int, float, bool)) and recorded[key] != ""
    }


def results_files(paths: Sequence[Path]) -> list[Path]:
    """The results files named by ``paths``: files, or every ``results_*.json`` under a
    folder (an ``--output_path``). A ``DCPMIError`` for a path that gives none."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.rglob("results_*.json"))
            if not inside:
                raise DCPMIError(
                    f"{path}: no results_*.json in this folder; give lm-eval's results files "
                    "or the --output_path folder of a run."
                )
            found += inside
        elif path.exists():  # read_json refuses what is not a regular file (a FIFO)
            found.append(path)
        else:
            raise DCPMIError(f"{path}: no such file or folder.")
    return list(dict.fromkeys(found))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past float
        return None
    return None if math.isnan(number) else number


def _reported(
    entry: Mapping[str, Any], kind: str = "accuracy"
) -> tuple[dict[str, float], dict[str, float]]:
    """The entry's numeric values and standard errors of the metrics of ``kind``."""
    values, stderr = {}, {}
    for key, value in entry.items():
        name, _comma, filter_name = str(key).partition(",")
        if filter_name != "none" or name.endswith("_stderr"):
            continue
        metric = metric_named(name)
        if metric is None or metric.kind != kind:
            continue
        number = _number(value)
        if number is None:
            continue
        values[name] = number
        error = _number(entry.get(f"{name}_stderr,none"))
        if error is not None:
            stderr[name] = error
    return values, stderr


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: infinity
        return None


def read_submission(path: Path, model_id: str | None = None) -> Submission:
    """``path``'s results (see ``TaskEntry``); a ``DCPMIError`` naming the file when it is
    not an lm-eval results file or holds no DC-PMI task."""
    data = read_json(path)
    block = data.get("dcpmi") if isinstance(data.get("dcpmi"), dict) else {}
    recorded = block.get("model")
    if model_id is None and isinstance(recorded, dict) and recorded.get("id"):
        model = recorded_identity(recorded, str(path))
    else:
        model = identify(recorded_model_args(data), model_id, read_files=False)
    configs = data.get("configs") if isinstance(data.get("configs"), dict) else {}
    versions = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    n_samples = data.get("n-samples") if isinstance(data.get("n-samples"), dict) else {}
    subtasks = data.get("group_subtasks") if isinstance(data.get("group_subtasks"), dict) else {}
    tasks: dict[str, TaskEntry] = {}
    unverifiable: dict[str, str] = {}
    for name, entry in data["results"].items():
        if not isinstance(entry, dict):
            continue
        values, stderr = _reported(entry)
        measures, measures_stderr = _reported(entry, "measure")
        is_group = name in subtasks and bool(subtasks.get(name))
        config = configs.get(name) if isinstance(configs.get(name), dict) else {}
        metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
        if not values or (not is_group and "domain_premise" not in metadata):
            # not a DC-PMI task (lm-eval's own tasks beside them are not ours), unless it
            # reports what only the plugin computes
            own = _plugin_metric(entry)
            if own is not None:
                unverifiable[str(name)] = own
            continue
        # a task's name becomes part of its samples file's name and is looked up in the
        # task index: one file's name, whatever the results file is called
        checked_name(name, str(path), "the task name")
        counts = n_samples.get(name) if isinstance(n_samples.get(name), dict) else {}
        version = versions.get(name)
        tasks[name] = TaskEntry(
            name=name,
            is_group=is_group,
            values=values,
            stderr=stderr,
            measures=measures,
            measures_stderr=measures_stderr,
            config=config,
            version=None if version is None else str(version),
            n=_int(counts.get("effective")),
            n_total=_int(counts.get("original")),
            subtasks=[str(t) for t in subtasks.get(name) or []],
        )
    if not any(not t.is_group for t in tasks.values()):
        raise DCPMIError(
            f"{path}: holds no DC-PMI task (tasks: {', '.join(sorted(data['results'])) or 'none'})"
            "; export and verify read the results of dcpmi_* tasks or your DC-PMI variants."
        )
    for name, samples in samples_files(path, [t for t in tasks if not tasks[t].is_group]).items():
        tasks[name].samples_file = samples
    for group in (t for t in tasks.values() if t.is_group):
        leaves = [tasks[s] for s in group.subtasks if s in tasks]
        if leaves and all(t.n is not None and t.n_total is not None for t in leaves):
            group.n = sum(t.n for t in leaves)  # type: ignore[misc]
            group.n_total = sum(t.n_total for t in leaves)  # type: ignore[misc]
    hashes = data.get("task_hashes") if isinstance(data.get("task_hashes"), dict) else {}
    hashes = {k: str(v) for k, v in hashes.items()}
    return Submission(path, data, model, tasks, hashes, unverifiable)


def _plugin_metric(entry: Mapping[str, Any]) -> str | None:
    """The first metric of ``entry`` that only the plugin computes (None: none); an entry
    reporting one claims to be a DC-PMI task's."""
    for key in entry:
        name = str(key).partition(",")[0].removesuffix("_stderr")
        metric = metric_named(name)
        if metric is not None and not metric.lm_eval_own:
            return name
    return None


@dataclass(frozen=True)
class InstalledTask:
    version: str | None  # None: the YAML sets none (a base_task: variant takes its base's)
    premise_sha256: str


@functools.cache
def _manager() -> Any:
    # The plugin's own tasks only: indexing lm-eval's thousands takes seconds, and a task
    # from someone's --include_path is not "installed" here anyway.
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    return TaskManager(include_path=str(task_configs_dir()), include_defaults=False)


def installed_task(name: str) -> InstalledTask | None:
    """The installed task ``name``'s version and premise digest, read from its YAML (the
    task is not built); None when no DC-PMI task of that name is installed."""
    from lm_eval_dcpmi._harness import entry_yaml, load_task_config
    from lm_eval_dcpmi.task import content_free_fields, identity_sha256, reference_contexts

    path = entry_yaml(_manager(), name)
    if path is None:
        return None
    config = load_task_config(path)
    if "domain_premise" not in config:
        return None
    source = str(path)
    found = reference_contexts(config, name, source)
    fields = content_free_fields(config, name, source)
    identity = identity_sha256(found, fields)
    version = (config.get("metadata") or {}).get("version")
    versioned = None if version is None else premise_versioned(version, identity)
    return InstalledTask(versioned, identity)


def installed_differences(submission: Submission) -> Iterable[str]:
    """Why ``submission``'s tasks are not the installed ones (premise, version, plugin)."""
    from lm_eval_dcpmi import __version__

    recorded = submission.plugin_version
    if recorded is None:
        yield (
            f"{submission.path}: records no plugin version (made before lm-eval-dcpmi "
            f"recorded it); the installed plugin is {__version__}"
        )
    elif recorded != __version__:
        yield (
            f"{submission.path}: made with lm-eval-dcpmi {recorded}, but {__version__} is installed"
        )
    for task in submission.tasks.values():
        if task.is_group:
            continue
        here = installed_task(task.name)
        if here is None:
            continue
        if task.premise_sha256 and task.premise_sha256 != here.premise_sha256:
            yield (
                f"{submission.path} ({task.name}): scored another domain premise or reference "
                f"contexts (premise_sha256 {task.premise_sha256[:8]}) than the installed task "
                f"({here.premise_sha256[:8]})"
            )
        elif task.version and here.version and task.version != here.version:
            yield (
                f"{submission.path} ({task.name}): version {task.version}, but the installed "
                f"task is {here.version}"
            )
