"""The steps of ``dcpmi run``, on lm-eval's public API.

1. ``check_tasks``: check the options lm-eval would only trip over once the model is
   loaded (``_option_checks``: ``--limit``, ``--output_path``, ``--use_cache``, the request
   cache folder), then build every task to be run with a ``TaskManager``, from the settings
   lm-eval itself derives from the command line (``EvaluatorConfig.process_tasks``), and
   load them. Loading reads the data and runs the plugin's per-document checks, so a bad
   data file, task config or document stops the run here, before any model exists. Also
   checked: every ``--dcpmi_task`` base task exists, and ``--samples`` names tasks of
   the run and documents they have. ``--quick N`` becomes ``--samples``: N documents
   evenly spread over each task's split; a ``--limit`` prefix whose gold labels are far
   from its split's gets a warning (``quick_look``).
2. ``evaluate``: ``lm_eval.__main__.cli_evaluate`` on the same command line, so that every
   lm-eval option keeps its meaning; then the DC-PMI table, read from the results file
   lm-eval wrote for this run (into the run's temporary folder when the user gave no
   --output_path; ``_saving`` knows which file is this run's, and when lm-eval could not
   save the results or samples, the run ends in an error, not exit status 0).

The tasks are built twice (step 1's are dropped): the price of not reaching into
lm-eval's evaluator, a few seconds against the minutes a model takes.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import __version__
from lm_eval_dcpmi._harness import (
    UnknownTask,
    entry_yaml,
    group_cycle,
    load_tasks,
    not_found,
    recorded_model_args,
)
from lm_eval_dcpmi._identity import NO_PRETRAINED, ModelIdentity, portable_results
from lm_eval_dcpmi._json_files import read_json, write_json
from lm_eval_dcpmi.cli import (
    _lm_eval_options as lm_eval_options,
)
from lm_eval_dcpmi.cli import (
    _option_checks as option_checks,
)
from lm_eval_dcpmi.cli import (
    _saving as saving,
)
from lm_eval_dcpmi.cli._lm_eval_options import lm_eval_argv
from lm_eval_dcpmi.cli._run_options import (
    MODEL_ID_OPTION,
    RunOptions,
    refuse_combinations,
    split_run_options,
)
from lm_eval_dcpmi.errors import DCPMIError, offline_errors, offline_fix
from lm_eval_dcpmi.task import (
    DCPMI_TASK_OPTION,
    DERIVED_SUFFIX,
    Shard,
    check_task_name,
    option_value,
    quick_samples,
    refuse_unmergeable,
    shard_samples,
    skewed_tasks,
    warn_skewed,
    write_derived_tasks,
)


class Terminated(BaseException):
    """SIGTERM, raised where the program is so that ``with`` blocks clean up. Not an
    ``Exception``: nothing that catches those may swallow it."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (main thread only; elsewhere the
    signal's handler cannot be set and stays as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def run(forwarded: Sequence[str]) -> int:
    """``dcpmi run`` with ``forwarded`` (its arguments): checks, then the evaluation."""
    import lm_eval_dcpmi_autoload
    from lm_eval_dcpmi import _autoload

    options, forwarded = split_run_options(forwarded, os.environ)
    shard = options.shard
    if shard is not None and shard.source:  # the job's log says which shard it scored
        print(f"dcpmi: --shard: shard {shard} ({shard.source})", file=sys.stderr)
    if lm_eval_options.read(["run", *forwarded]).tasks == ["list"]:  # lm-eval's old habit
        from lm_eval_dcpmi.cli import _tasks as task_list

        task_list.print_listing()
        return 0
    lm_eval_dcpmi_autoload.install()  # also when LM_EVAL_DCPMI_AUTOLOAD=0 or no .pth
    with tempfile.TemporaryDirectory(prefix="dcpmi_run_") as scratch:
        folder = Path(scratch, "tasks")
        folder.mkdir()
        names = write_derived_tasks(options.dcpmi_tasks, folder)
        with _autoload.extra_task_folders([folder] if names else []):
            argv = lm_eval_argv(forwarded, names)
            checked = check_tasks(argv[1:], options)
            if options.quick is not None or shard is not None:  # lm-eval scores them as --samples
                argv += ["--samples", json.dumps(checked.config.samples)]
            return evaluate(argv, checked, Path(scratch), options.model_id)


@dataclass
class CheckedRun:
    """What step 1 found: lm-eval's ``EvaluatorConfig`` (with ``--quick``'s or the shard's
    documents as its ``samples``), ``--quick``'s N, ``--shard``'s shard, and the tasks whose
    ``--limit`` prefix is not a fair look (task -> why; ``skewed_tasks``)."""

    config: Any
    quick: int | None = None
    shard: Shard | None = None
    skewed: dict[str, str] = field(default_factory=dict)


def check_tasks(argv: Sequence[str], options: RunOptions | None = None) -> CheckedRun:
    """Step 1 (see the module's docstring); ``argv``: lm-eval's options, ``options``: the
    plugin's."""
    options = RunOptions() if options is None else options
    quick, shard = options.quick, options.shard
    config = lm_eval_options.config(argv)
    option_checks.check_options(config)
    refuse_combinations(options, config.limit, config.samples)
    with lm_eval_options.quietly():
        try:
            manager = config.process_tasks(config.metadata)
        except ValueError as err:  # lm-eval 0.4: "Tasks not found: a, b"
            unknown = not_found(err)
            if unknown is None:
                raise
            raise DCPMIError(_not_found(unknown, config)) from None
    check_base_tasks(manager.all_tasks, options.dcpmi_tasks)
    with lm_eval_options.quietly():
        try:
            tasks = load_tasks(manager, config.tasks)
        except UnknownTask as unknown:  # lm-eval 0.5 finds it out only here
            raise DCPMIError(_not_found(unknown, config)) from None
        except RecursionError:  # lm-eval follows a group that holds itself forever
            raise DCPMIError(_cycle(manager, config.tasks)) from None
        except ImportError as err:  # a YAML's `!function module.name` that does not import
            raise DCPMIError(
                f"lm-eval: {err}; a `!function` of a task YAML names a module that cannot be "
                "imported here: fix its name, or put the module beside the YAML (e.g. utils.py)."
            ) from None
        except offline_errors() as err:  # lm-eval's own task: its Hub dataset
            raise DCPMIError(
                f"lm-eval could not load a task's dataset ({type(err).__name__}: {err}). "
                + offline_fix()
            ) from None
    if getattr(config, "log_samples", False):  # any task's, now: not after scoring it
        for name in tasks:
            check_task_name(name, str(entry_yaml(manager, name) or "its YAML"))
    sizes = {name: len(task.eval_docs) for name, task in tasks.items()}
    check_samples(config.samples, sizes)
    checked = CheckedRun(config, quick, shard)
    if shard is not None:
        refuse_unmergeable(shard, tasks)
        config.samples = shard_samples(sizes, shard)
    elif quick is not None:
        config.samples = quick_samples(sizes, quick)
    elif config.limit is not None:
        checked.skewed = skewed_tasks(tasks, config.limit)
        warn_skewed(checked.skewed, config.limit)
    return checked


def _cycle(manager: Any, specs: Any) -> str:
    for name in lm_eval_options.task_names(specs):
        cycle = group_cycle(manager, name)
        if cycle:
            where = entry_yaml(manager, cycle[-2])
            return (
                f"group {cycle[0]!r} holds itself ({' -> '.join(cycle)}), so lm-eval would "
                f"build it forever; remove {cycle[-1]!r} from the task list of {cycle[-2]!r}"
                + (f" ({where})." if where else ".")
            )
    return "lm-eval's task builder recursed without end (a group that holds itself?)."


def _not_found(unknown: UnknownTask, config: Any) -> str:
    return (
        f"lm-eval: {str(unknown).rstrip('.')}.{_did_you_mean(unknown.names, config)} `dcpmi "
        "tasks` lists the plugin's tasks, `lm_eval ls tasks` every registered one; a folder "
        "of your own joins them with --include_path."
    )


def _did_you_mean(names: list[str], config: Any) -> str:
    """The registered names closest to each unknown name (lm-eval's TaskManager is indexed
    again: this is only the error's path)."""
    from lm_eval.tasks import TaskManager

    if not names:
        return ""
    with lm_eval_options.quietly():
        manager = TaskManager(include_path=config.include_path, metadata=config.metadata or {})
    close = {name: _closest(name, manager.all_tasks) for name in names}
    if len(names) == 1:
        return f" Did you mean: {', '.join(close[names[0]])}?" if close[names[0]] else ""
    found_any = [f"{', '.join(c)} for {name}" for name, c in close.items() if c]
    return f" Did you mean: {'; '.join(found_any)}?" if found_any else ""


def _closest(name: str, candidates: Sequence[str]) -> list[str]:
    """The candidates most like ``name`` (several only on a tie), if any is close."""
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.75)
    ratio = [difflib.SequenceMatcher(None, name, c).ratio() for c in close]
    return [c for c, r in zip(close, ratio, strict=True) if r == max(ratio)]


def check_base_tasks(registered: Sequence[str], derived: Sequence[tuple[str, str | None]]) -> None:
    """Every ``--dcpmi_task`` base task is registered; else an error with close names
    (never a variant written for this run)."""
    ours = {base + DERIVED_SUFFIX for base, _premise in derived}
    known = [name for name in registered if name not in ours]
    known_set = set(known)
    for base, premise in derived:
        if base in known_set:
            continue
        raise DCPMIError(
            f"{DCPMI_TASK_OPTION} {option_value(base, premise)!r}: {base!r} is not a registered "
            "task (searched lm-eval's tasks, the plugin's and --include_path)."
            f"{_close(base, known)}"
            " A task of your own needs its folder in --include_path."
        )


def check_samples(samples: dict[str, list[int]] | None, sizes: dict[str, int]) -> None:
    """``--samples`` names only tasks the run evaluates (``sizes``: task -> documents),
    and only documents they have; tasks it leaves out get a warning (lm-eval runs them in
    full)."""
    if not samples:
        return
    for name, indices in samples.items():
        if name not in sizes:
            raise DCPMIError(
                f"--samples names {name!r}, which is not a task this run evaluates (tasks: "
                f"{_few(sizes)}); lm-eval would ignore its indices.{_close(name, list(sizes))}"
                " Name tasks, not groups, and run them with --tasks."
            )
        beyond = [i for i in indices if i >= sizes[name]]
        if beyond:
            raise DCPMIError(
                f"--samples: {name} has {sizes[name]} documents (indices 0-{sizes[name] - 1}); "
                f"{beyond[0]} is out of range."
            )
    full = [name for name in sizes if name not in samples]
    if full:
        print(
            f"dcpmi: warning: --samples gives no documents for {len(full)} task(s) "
            f"({_few(full)}); lm-eval evaluates them in full.",
            file=sys.stderr,
        )


def _few(names: Sequence[str] | dict[str, Any], most: int = 6) -> str:
    names = list(names)
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _close(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.75)
    return f" Did you mean: {', '.join(close)}?" if close else ""


# ---------------------------------------------------------------- step 2


def evaluate(
    argv: Sequence[str], checked: CheckedRun, scratch: Path, model_id: str | None = None
) -> int:
    """Step 2: lm-eval's own ``run`` command on ``argv``; the results files it wrote name
    the model portably (``after_run``); then the DC-PMI table."""
    from lm_eval_dcpmi._harness import cli_evaluate

    argv = list(argv)
    config = checked.config
    output = config.output_path
    if output is None and not config.hf_hub_log_args:
        # Without --output_path lm-eval writes no results; the table needs them.
        output = str(scratch / "results")
        argv += ["--output_path", output]
    saved_argv = sys.argv
    sys.argv = argv
    try:
        with (
            saving.watched() as saved,
            option_checks.model_errors(config),
        ):
            cli_evaluate()
    finally:
        sys.argv = saved_argv
    results = written_results(saved)
    if results is not None and int(os.environ.get("RANK", "0")) == 0:
        after_run([results], model_id, shard_record(checked.shard))
        print_table(results, checked)
    saved.check()
    return 0


def after_run(
    written: Sequence[Path], model_id: str | None, recorded: Mapping[str, Any] | None = None
) -> None:
    """``dcpmi run``'s last step: the results files the run wrote name the model portably
    (and record ``recorded`` in their ``dcpmi`` block); a model that has no id gets one
    warning saying how to name it."""
    for path in written:
        identity = portable_results_file(path, model_id, __version__, recorded)
        if identity.id is None and identity.local_name and identity.how != NO_PRETRAINED:
            print(
                f"dcpmi: warning: {path} names the model {identity.name} ({identity.how}); "
                f"give {MODEL_ID_OPTION} ORG/NAME (its hub id) to name it for leaderboards "
                "(dcpmi export asks for it).",
                file=sys.stderr,
            )


def portable_results_file(
    path: Path,
    model_id: str | None = None,
    plugin_version: str | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> ModelIdentity:
    """Rewrite the results file ``path`` portably (numbers untouched); its identity.
    ``recorded``: more entries for its ``dcpmi`` block (``dcpmi run --shard``'s shard)."""
    data = read_json(path)
    data = portable_results(data, recorded_model_args(data), model_id, plugin_version)
    data["dcpmi"].update(recorded or {})
    write_json(path, data)
    return ModelIdentity(**data["dcpmi"]["model"])


def shard_record(shard: Shard | None) -> dict[str, Any]:
    """What a shard's results file records of it (``dcpmi merge`` reads it)."""
    return {} if shard is None else {"shard": shard.as_dict()}


def written_results(saved: saving.SavedFiles) -> Path | None:
    """This run's own results file, whole, as lm-eval wrote it (None: none was saved, or
    not by this process); never another run's file in the same --output_path."""
    return saved.results


def print_table(results_file: Path, checked: CheckedRun | None = None) -> None:
    """The DC-PMI table of ``results_file``, marked as step 1 found the run: ``--quick``'s
    sample, and no significance marks on a skewed ``--limit`` prefix."""
    from lm_eval_dcpmi.report import ReportError, format_run, load_results

    try:
        (one,) = load_results([results_file])
    except ReportError:  # the run held no DC-PMI task: lm-eval's own table says it all
        return
    if checked is not None:
        one.quick = checked.quick
        one.drop_significance(checked.skewed)
    print("\nDC-PMI accuracies (%):\n")
    print(format_run(one))
    if checked is not None and checked.shard is not None:
        shard = checked.shard
        print(
            f"\nShard {shard} only (one document in {shard.count}); `dcpmi merge` joins the "
            f"{shard.count} shards' --output_path folders into one run."
        )
