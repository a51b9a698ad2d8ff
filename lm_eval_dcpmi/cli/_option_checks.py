"""``dcpmi run``'s checks of the options lm-eval would only trip over once the model is
loaded: ``--limit``, ``--output_path``, ``--use_cache`` and the request cache folder
(``--cache_requests``). Each fault is one ``DCPMIError`` line naming the option.

lm-eval reads ``--limit`` 0 or below as a fraction and fails after the model is set up;
it only logs a warning when it cannot save its results, after the whole evaluation; and
an answer cache (``--use_cache``) that is no SQLite file, or a folder it cannot write,
ends in ``sqlite3``'s traceback once the model is loaded.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lm_eval_dcpmi._harness import check_cache_owner, parse_model_args, use_cache_files
from lm_eval_dcpmi.errors import DCPMIError, cause_of, offline_errors


def check_options(config: Any) -> None:
    """All of this module's checks, on lm-eval's ``EvaluatorConfig``."""
    check_limit(config.limit)
    check_output_path(config.output_path)
    check_use_cache(config.use_cache)
    check_cache_owner(config)
    check_request_cache(config.cache_requests or {})


def check_limit(limit: Any) -> None:
    """lm-eval reads ``--limit`` below 1 as a fraction of each task's documents, from 1 up
    as a count; 0, a negative number (or one that is not finite) ends in a traceback once
    the model is loaded."""
    if limit is None:
        return
    try:
        value = float(limit)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise DCPMIError(
            f"--limit {limit!r}: give a number of documents per task (1 or more, e.g. "
            "--limit 20) or a fraction of each task's documents between 0 and 1 (e.g. "
            "--limit 0.1); leave --limit out to evaluate every document."
        )


def folder_problem(folder: Path) -> str | None:
    """Why files cannot be made in ``folder`` (made with its parents when missing), or None:
    the nearest existing folder is tried with a file made and removed at once (permission
    bits say nothing to root, nor of a read-only file system)."""
    for candidate in [folder, *folder.parents]:
        if candidate.is_symlink() and not candidate.exists():
            return f"{candidate} is a link to nothing"
        if not candidate.exists():
            continue
        if not candidate.is_dir():
            return f"{candidate} is a file, not a folder"
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except OSError as err:
            return f"no file can be made in the folder {candidate} ({err.strerror or err})"
        return None
    return None


def output_path_problem(output: str | None) -> str | None:
    """Why lm-eval cannot save results at ``output``, or None (lm_eval/loggers/
    evaluation_tracker.py, ``save_results_aggregated``: a ``.json`` path gets
    ``<stem>_<date>.json`` beside it, any other path is a folder that gets
    ``<model>/results_<date>.json``)."""
    if output is None:
        return None
    path = Path(output).expanduser()
    if path.suffix == ".json":
        return folder_problem(path.parent)
    if path.exists() and not path.is_dir():
        return "it is a file; lm-eval writes its results into a folder there"
    return folder_problem(path)


def check_output_path(output: str | None) -> None:
    """``--output_path`` can take lm-eval's results."""
    problem = output_path_problem(output)
    if problem is not None:
        raise DCPMIError(
            f"--output_path {output}: {problem}, so lm-eval could not save the results. "
            "Give a folder that can be written (or a path ending in .json, for results "
            "files named after it)."
        )


def check_use_cache(use_cache: str | None) -> None:
    """``--use_cache PATH``: its folder can be written, and every ``PATH_rank<N>.db`` there
    is a sound SQLite database (opened read-only: ``PRAGMA quick_check``)."""
    if use_cache is None:
        return
    cache_file = Path(f"{use_cache}_rank0.db").expanduser()
    problem = folder_problem(cache_file.parent)
    if problem is not None:
        raise DCPMIError(
            f"--use_cache {use_cache}: {problem}, so lm-eval cannot keep its answer cache "
            f"({cache_file.name}, one per process) there; give a path in a folder that can "
            "be written."
        )
    for path in use_cache_files(use_cache):
        problem = sqlite_problem(path)
        if problem is not None:
            raise DCPMIError(
                f"--use_cache {use_cache}: {path} is not a sound SQLite answer cache "
                f"({problem}); move it away or delete it (the run then scores every request "
                "again), or give another --use_cache path."
            )


def sqlite_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable, undamaged SQLite database, or None."""
    if path.is_dir():
        return "a folder"
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    except sqlite3.Error as err:
        return str(err)
    try:
        rows = connection.execute("PRAGMA quick_check").fetchall()
    except sqlite3.Error as err:
        return str(err)
    finally:
        connection.close()
    found = [str(row[0]) for row in rows]
    return None if found == ["ok"] else "; ".join(found[:3])


def check_request_cache(cache_requests: dict[str, bool] | str) -> None:
    """``--cache_requests``: lm-eval's request cache folder (``LM_HARNESS_CACHE_PATH``,
    else a folder inside lm-eval, read when lm-eval is imported) can be written
    (true, refresh) or listed (delete). ``cache_requests``: lm-eval's dict of the option
    (``request_caching_arg_to_dict``), or the option's value."""
    if isinstance(cache_requests, str):
        cache_requests = {
            "cache_requests": cache_requests in ("true", "refresh"),
            "delete_requests_cache": cache_requests == "delete",
        }
    if not any(cache_requests.values()):
        return
    from lm_eval_dcpmi._harness import request_cache_folder

    folder = request_cache_folder()
    if cache_requests.get("delete_requests_cache"):
        problem = f"{folder} is a file, not a folder" if folder.is_file() else None
    else:
        problem = folder_problem(folder)
    if problem is not None:
        where = (
            "LM_HARNESS_CACHE_PATH"
            if os.environ.get("LM_HARNESS_CACHE_PATH")
            else "lm-eval's request cache folder"
        )
        raise DCPMIError(
            f"--cache_requests: {where} {folder}: {problem}, so lm-eval cannot keep the "
            "requests it builds there; set LM_HARNESS_CACHE_PATH to a folder that can be "
            "written, or leave --cache_requests out."
        )


_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '(\w+)'")


@contextlib.contextmanager
def model_errors(config: Any) -> Iterator[None]:
    """What the model raises for an option, as one line:

    * a ``--model_args`` key the model does not take. ``hf`` and ``hf-prefix`` pass keys
      they do not know on to transformers' ``from_pretrained``, which takes many (and any
      of the model's config), so the key is only known to be wrong once the model class
      refuses it;
    * a file of the Hugging Face Hub the model needs (its weights, its tokenizer: lm-eval's
      ``dummy`` model renders ``--apply_chat_template`` with a Hub tokenizer) that is not
      cached and cannot be downloaded.
    """
    try:
        yield
    except TypeError as err:
        found = _UNEXPECTED_KEYWORD.search(str(err))
        if found is None or found[1] not in parse_model_args(config.model_args):
            raise
        raise DCPMIError(
            f"--model_args {found[1]}=...: the {config.model} model does not take {found[1]!r} "
            f"({err}); remove it from --model_args, or check its spelling."
        ) from None
    except OSError as err:
        if cause_of(err, offline_errors()) is None:
            raise
        what = "a file of the model's from the Hugging Face Hub"
        if config.model == "dummy" and config.apply_chat_template:
            from lm_eval_dcpmi._harness import dummy_tokenizer_name

            name = dummy_tokenizer_name()
            what = (
                f"the Hub tokenizer {name!r}, which lm-eval's dummy model renders "
                "--apply_chat_template with,"
            )
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DCPMIError(
            f"lm-eval could not load {what} ({first_line}): it is not in the local Hugging "
            "Face cache and cannot be downloaded (offline mode, or no network). Download it "
            "once with network access"
            + (", or leave --apply_chat_template out." if config.apply_chat_template else ".")
        ) from None
