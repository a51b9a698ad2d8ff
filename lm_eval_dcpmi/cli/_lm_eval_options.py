"""lm-eval's own reading of an ``lm_eval run`` command line, for ``dcpmi run``.

``dcpmi run`` needs to know what the user set (to add its defaults for the rest), the
tasks and ``--samples`` (to pick the default tasks and check them), and the settings
lm-eval builds its ``TaskManager`` from (to build the tasks before the model). All of it
comes from lm-eval: its argument parser (``parse_namespace``) and
``lm_eval.config.EvaluatorConfig.from_cli`` (defaults, ``--config`` YAML, a ``--samples``
file, metadata merged with the model arguments), so that ``dcpmi run`` reads every option
exactly as the ``cli_evaluate`` run that follows will. ``lm_eval_argv`` adds
``dcpmi run``'s defaults for what the user left unset.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi._json_files import json_problem, parse_json
from lm_eval_dcpmi.cli._run_options import option_values
from lm_eval_dcpmi.errors import DCPMIError

DEFAULT_TASKS = "dcpmi"
SAMPLES_EXAMPLE = "'{\"dcpmi_copa\": [0, 5, 7]}'"


def parse_namespace(argv: Sequence[str]) -> argparse.Namespace:
    """lm-eval's parse of ``argv`` (``['run', ...options]``), as ``lm_eval`` would parse it.

    The one private name ``dcpmi run`` uses: ``lm_eval._cli.HarnessCLI``, the parser of
    lm-eval's public entry point (lm_eval/__main__.py, ``cli_evaluate``: ``parser =
    HarnessCLI(); args = parser.parse_args()``, which reads ``sys.argv``). lm-eval has no
    public function that parses a command line without running it. Bad options end here
    as they would in lm-eval: argparse's usage message, exit status 2.
    """
    from lm_eval_dcpmi._harness import harness_parser

    _check_json_options(argv)
    saved = sys.argv
    sys.argv = ["lm_eval", *argv]
    try:
        return harness_parser().parse_args()
    except ValueError as err:  # e.g. bad JSON in --model_args or --metadata: a traceback
        raise DCPMIError(f"lm-eval: {err}{_first_json_error(argv)}") from None
    finally:
        sys.argv = saved


# Options whose value may be a JSON object. lm-eval releases read them differently (0.4.12
# parses --metadata with json.loads and exits through argparse's usage message; 0.4.13
# raises "Invalid JSON" without the position), so bad JSON is refused here first.
_JSON_OPTIONS = ("--metadata", "--model_args", "-a", "--samples", "-E")


def _check_json_options(argv: Sequence[str]) -> None:
    for option, value in option_values(argv):
        if option in _JSON_OPTIONS and value.lstrip().startswith("{"):
            parse_json(
                value,
                f"{option} {value!r}",
                line=0,
                fix="write a JSON object with double-quoted names and strings",
            )


def _first_json_error(argv: Sequence[str]) -> str:
    """Where the first argument that looks like a JSON object stops being JSON."""
    for value in argv:
        text = value.partition("=")[2] if value.startswith("-") else value
        if text.lstrip().startswith("{"):
            try:
                json.loads(text)
            except json.JSONDecodeError as err:
                return f" ({json_problem(repr(text), err, line=0)})"
    return ""


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """No log records below ERROR and no stdout: lm-eval's warnings and the ``--config``
    echo come once, from the ``cli_evaluate`` run, not from ``dcpmi run``'s checks too."""
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.WARNING))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


@dataclass(frozen=True)
class GivenOptions:
    """What the user's command line and ``--config`` YAML set."""

    names: frozenset[str]  # option names (lm-eval's dests), from either
    tasks_option: bool  # --tasks given on the command line
    tasks: list[str]  # from --tasks or the YAML, comma lists split
    samples: dict[str, list[int]] | None
    model: str | None = None  # --model (or the YAML's), if set


def read(argv: Sequence[str]) -> GivenOptions:
    """The options ``argv`` (``['run', ...]``) sets, read by lm-eval's parser and config."""
    if len(argv) < 2:  # `lm_eval run` alone prints its help; `dcpmi run` alone runs
        return GivenOptions(frozenset(), False, [], None, None)
    namespace = parse_namespace(argv)
    names = {key for key, value in vars(namespace).items() if value is not None}
    names -= {"command", "func"}
    config = _config(namespace)
    if getattr(namespace, "config", None):
        names |= set(config.load_yaml_config(namespace.config))
    return GivenOptions(
        frozenset(names),
        namespace.tasks is not None,
        task_names(config.tasks),
        config.samples,
        config.model if "model" in names else None,
    )


def config(argv: Sequence[str]) -> Any:
    """lm-eval's ``EvaluatorConfig`` of ``argv`` (``['run', ...]``), as ``lm_eval run``
    builds it; its errors become one-line ``DCPMIError``s."""
    return _config(parse_namespace(argv))


def task_names(tasks: Any) -> list[str]:
    """A config's tasks (a comma list or a list of them) as a list of names."""
    items = [tasks] if isinstance(tasks, str) else list(tasks or [])
    return [name for item in items for name in str(item).split(",") if name]


def _config(namespace: argparse.Namespace) -> Any:
    from lm_eval_dcpmi._harness import evaluator_config

    namespace.samples = _samples_option(getattr(namespace, "samples", None))
    try:
        with quietly():
            config = evaluator_config(namespace)
    except (ValueError, TypeError, OSError) as err:  # lm-eval's own checks of the options
        raise DCPMIError(f"lm-eval: {err}") from None
    if config.samples is not None:
        config.samples = _samples_shape(config.samples, "--samples")
    return config


def _samples_option(value: Any) -> Any:
    """``--samples`` as a dict: lm-eval's parser leaves a file name (or any other text that
    is not JSON) as a string; read the file here, with its name in any error."""
    if not isinstance(value, str):
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise DCPMIError(
            f"--samples {value!r}: neither a JSON object nor a file; give task names and "
            f"document indices, e.g. --samples {SAMPLES_EXAMPLE}, or a JSON file of that form."
        )
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise DCPMIError(f"--samples {path}: cannot be read as UTF-8 text ({err}).") from None
    data = parse_json(
        text,
        f"--samples {path}",
        fix="the file must hold one JSON object of task names and document indices.",
    )
    return _samples_shape(data, f"--samples {path}")


def _samples_shape(data: Any, where: str) -> dict[str, list[int]]:
    def indices(values: Any) -> bool:
        return isinstance(values, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in values
        )

    if not isinstance(data, dict) or not data or not all(map(indices, data.values())):
        raise DCPMIError(
            f"{where}: expected a JSON object of task names and lists of document indices "
            f"(0, 1, ...), e.g. {SAMPLES_EXAMPLE}; got {str(data)[:80]!r}."
        )
    return data


# ---------------------------------------------------------------- the lm-eval command line


def embedded_model_args() -> str:
    """``--model_args`` for the embedded SmolLM2-135M GGUF model."""
    try:
        return embedded.model_args_string()
    except embedded.EmbeddedModelMissing as err:
        raise SystemExit(f"dcpmi: no --model given and {err}") from None


def lm_eval_argv(forwarded: Sequence[str], derived_tasks: Sequence[str] = ()) -> list[str]:
    """The lm-eval command line for ``dcpmi run``: the user's options, then our defaults
    for what neither they nor their ``--config`` YAML set (lm-eval's parser decides).

    Tasks: the user's (``--tasks`` or the YAML's) plus ``derived_tasks`` (the
    ``--dcpmi_task`` variants); without them, the tasks ``--samples`` names (lm-eval would
    run every other task in full), plus the variants; else the variants alone; else the
    ``dcpmi`` group.
    """
    argv = list(forwarded)
    given = read(["run", *argv])
    if "model" not in given.names:
        argv = ["--model", "hf", *argv]
    if given.model in (None, "hf", "hf-prefix") and "model_args" not in given.names:
        # No HF_HUB_OFFLINE here: the model is read from disk either way, and offline
        # mode would also stop the downloads of lm-eval's hub datasets and ours.
        argv += ["--model_args", embedded_model_args()]
    tasks = _task_list(given, derived_tasks)
    if tasks:
        argv += ["--tasks", ",".join(tasks)]  # lm-eval appends repeated --tasks
    if "batch_size" not in given.names:
        argv += ["--batch_size", "8"]  # lm-eval's default of 1 leaves the CPU idle
    if "device" not in given.names:
        import torch

        if not torch.cuda.is_available():
            argv += ["--device", "cpu"]
    return ["lm_eval", "run", *argv]


def _task_list(given: GivenOptions, derived: Sequence[str]) -> list[str]:
    """What ``--tasks`` to add (see ``lm_eval_argv``); empty: add none."""
    if given.tasks_option:
        return list(derived)  # appended to the user's --tasks
    if given.tasks:  # from --config: a --tasks option replaces them, so repeat them
        tasks = given.tasks
        return [*tasks, *(t for t in derived if t not in tasks)] if derived else []
    chosen = list(given.samples) if given.samples else ([] if derived else [DEFAULT_TASKS])
    return [*chosen, *(t for t in derived if t not in chosen)]
