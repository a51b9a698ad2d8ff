"""The fuzz tier's machinery (tests/test_fuzz.py): the ``dcpmi`` process it runs commands
in, snapshots of the files around a case, the numbers each command gives, and the oracle.

**The process** (``CliWorker``, the script ``fuzz_worker.py``): one Python process runs
every command as ``cli.main(argv)``, so the tokenizer, the task index and the data load
once. A command that does not answer within its time is a hang: a FIFO the case made is
opened for writing and closed (the reader then sees its end), and a process that still does
not answer is killed and replaced. Its memory is capped (a count of 10^12 read from a file
fails there with ``MemoryError`` instead of taking the machine's memory).

**The oracle** (``problems``): for each command, either it accepts the case with every
number it gives equal to what it gives for the genuine files (``*_numbers``), or it refuses
it: a non-zero status and one line on stderr that starts with ``dcpmi <command>:``. Never
a traceback, a hang, a process that died, a file written outside ``--out`` (``snapshot``
of the case's folder), or files left in ``--out`` by a refusal.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import select
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lm_eval_dcpmi.rules import _scoring as scoring

WORKER = Path(__file__).with_name("fuzz_worker.py")

# ---------------------------------------------------------------- the dcpmi process


@dataclass
class Outcome:
    """What one command did."""

    argv: list[str]
    status: int | None = None  # None: it raised, hung or died
    out: str = ""
    err: str = ""
    error: str | None = None  # the traceback of an exception that escaped main()
    hang: bool = False  # no answer within its time
    blocked: bool = False  # waited on a FIFO for a writer (forever, but for the fuzzer)
    died: bool = False
    seconds: float = 0.0


class CliWorker:
    """``dcpmi`` commands run one after the other in one process (``fuzz_worker.py``)."""

    def __init__(self, warm_up: list[str] | None = None, cwd: Path | None = None) -> None:
        self.warm_up = warm_up  # run first in every new process, uncapped
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.started = 0

    def _start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=os.environ.copy(),
        )
        self.started += 1
        if self.warm_up is not None:
            self._ask(self.warm_up, self.cwd or Path.cwd(), timeout=600, cap=False)

    def call(
        self,
        argv: list[str],
        cwd: Path,
        timeout: float,
        unblock: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Run ``dcpmi ARGV`` in ``cwd``, for at most ``timeout`` seconds; ``unblock``, each
        second, frees a command blocked on a special file (which then counts as hung)."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        return self._ask(argv, cwd, timeout, cap=True, unblock=unblock)

    def _ask(
        self,
        argv: list[str],
        cwd: Path,
        timeout: float,
        cap: bool,
        unblock: Callable[[], bool] | None = None,
    ) -> Outcome:
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        request = {"argv": [str(a) for a in argv], "cwd": str(cwd), "cap": cap}
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            self.close()
            return Outcome(list(argv), died=True)
        blocked, waited, ready = False, 0.0, []
        while not ready and waited < timeout:
            ready, _, _ = select.select([process.stdout], [], [], 1)
            waited += 1
            # a command blocked opening a FIFO would wait for a writer forever: free it
            if not ready and unblock is not None and unblock():
                blocked = True
        if not ready:
            self.close()
            return Outcome(list(argv), hang=True, seconds=timeout)
        line = process.stdout.readline()
        if not line:
            self.close()
            return Outcome(list(argv), died=True)
        answer = json.loads(line)
        return Outcome(list(argv), blocked=blocked, **answer)

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()  # the process this helper started, by its own handle
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


def unblock_fifos(root: Path) -> bool:
    """Open every FIFO under ``root`` for writing and close it: a command blocked opening
    or reading one gets an empty file and goes on. Whether one had a reader (a command
    that would have waited for a writer forever)."""
    freed = False
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    freed = True
            except OSError:
                pass  # no reader has it open (ENXIO)
    return freed


# ---------------------------------------------------------------- files around a case


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): its kind, size and change time."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            kind = stat.S_IFMT(info.st_mode)
            size = info.st_size if stat.S_ISREG(info.st_mode) else 0
            entries[os.path.relpath(path, root)] = (kind, size, info.st_mtime_ns, info.st_ino)
    return entries


def changed(before: Mapping[str, tuple], after: Mapping[str, tuple]) -> list[str]:
    """The entries added, removed or changed between two snapshots."""
    return sorted(
        path
        for path in set(before) | set(after)
        if before.get(path) != after.get(path)
        and not (path in before and path in after and stat.S_ISDIR(before[path][0]))
    )


def written_outside(changes: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The changed paths (relative) that lie under none of the ``allowed`` folders."""
    prefixes = [a.rstrip("/") for a in allowed]
    return [p for p in changes if not any(p == a or p.startswith(a + os.sep) for a in prefixes)]


# ---------------------------------------------------------------- the numbers


def number(value: Any) -> float | None:
    """``value`` as a float, if it is a number or a numeric string (not a bool)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def same_number(a: float | None, b: float | None) -> bool:
    """Equal within the project's tolerance (``verification._recompute.close_enough``)."""
    if a is None or b is None:
        return a is b
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def differences(
    before: Mapping[Any, Any],
    after: Mapping[Any, Any],
    optional: Callable[[Any], bool] = lambda key: False,
    limit: int = 3,
) -> list[str]:
    """The keys whose numbers differ (added, dropped or changed), as text; a key that is
    ``optional`` may be dropped."""
    found = []
    for key in sorted(set(before) | set(after), key=repr):
        if key not in after and optional(key):
            continue
        a, b = before.get(key, "absent"), after.get(key, "absent")
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                found.append(f"{key}: {a!r} -> {b!r}")
        elif isinstance(a, tuple) or isinstance(b, tuple):
            # numbers, not their text: -0.0 is 0.0 (the fifth fuzz run's one finding)
            if not (
                isinstance(a, tuple)
                and isinstance(b, tuple)
                and len(a) == len(b)
                and all(same_number(x, y) for x, y in zip(a, b, strict=True))
            ):
                found.append(f"{key}: {a!r} -> {b!r}")
        elif not same_number(a, b):
            found.append(f"{key}: {a!r} -> {b!r}")
    return found[:limit] + ([f"and {len(found) - limit} more"] if len(found) > limit else [])


def claims(results: Any) -> dict[tuple, Any]:
    """What a results file states in numbers: every metric and standard error of every task
    (``name,filter`` keys), its document counts and few-shot counts."""
    found: dict[tuple, Any] = {}
    if not isinstance(results, dict):
        return found
    tasks = results.get("results") if isinstance(results.get("results"), dict) else {}
    for task, entry in tasks.items():
        for key, value in entry.items() if isinstance(entry, dict) else ():
            if "," in str(key):
                found[("results", task, key)] = _claimed(value)
    # the counts of the tasks the results hold (an entry of no such task shows nowhere)
    for section in ("n-samples", "n-shot"):
        block = results.get(section)
        for task, value in block.items() if isinstance(block, dict) else ():
            if task not in tasks:
                continue
            if section == "n-samples" and isinstance(value, dict):
                for key in ("original", "effective"):
                    found[(section, task, key)] = _claimed(value.get(key))
            else:
                found[(section, task)] = _claimed(value)
    return found


def optional_claim(key: tuple) -> bool:
    """A number a results file may lack and still verify, as ``dcpmi verify`` documents:
    a standard error, the few-shot count (0 when absent), and the measures and counts
    added after the first release (files written before them lack them)."""
    if key[0] == "n-shot":
        return True
    if key[0] != "results":
        return False
    name = str(key[2]).partition(",")[0]
    row = scoring.metric_named(name.removesuffix("_stderr"))
    return name.endswith("_stderr") or (
        row is not None and row.kind != "accuracy" and not row.in_first_release
    )


def _claimed(value: Any) -> Any:
    """A number as a float; a list of numbers as a tuple of floats (a BC item's gold index
    1 is 1.0), compared number by number; anything else as JSON text."""
    as_number = number(value)
    if as_number is not None:
        return as_number
    if isinstance(value, list) and all(number(x) is not None for x in value):
        return tuple(number(x) for x in value)
    return json.dumps(value, default=str)


def results_claims(folder: Path) -> dict[tuple, Any]:
    """``claims`` of the results files under ``folder`` (each read as JSON, if it is)."""
    found: dict[tuple, Any] = {}
    for path in sorted(folder.rglob("results_*.json")):
        try:
            data = json.loads(path.read_bytes()) if path.is_file() else None
        except (ValueError, RecursionError):
            data = None
        found.update(claims(data))
    return found


# The report's CSV columns that are names, not numbers; and the split's size, which the
# report shows as the results file records it (only the data can tell it: dcpmi verify).
CSV_NAMES = {"model", "task", "best", "study", "statistic", "method", "quartile", "limit"}
AS_RECORDED = {"n_total"}


def report_numbers(out: Path) -> dict[tuple, Any]:
    """Every numeric cell of the report's CSV files, by file, row and column."""
    found: dict[tuple, Any] = {}
    for path in sorted(out.glob("*.csv")):
        rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
        for i, row in enumerate(rows):
            for column, cell in row.items():
                if column not in CSV_NAMES | AS_RECORDED:
                    found[(path.name, i, column)] = cell
    return found


# Export fields that are no number of the run: when the export ran, ids made of it.
VOLATILE = {"retrieved_timestamp", "evaluation_id"}
_NOTE_NUMBER = re.compile(r"\b(acc\w*|pma\w*|stderr|n)[ =](-?[0-9.]+(?:e-?\d+)?|nan|inf)")


def _leaves(value: Any, path: tuple = ()) -> Iterable[tuple[tuple, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in VOLATILE:
                yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, float(value)
    elif isinstance(value, str) and path and path[-1] == "notes":
        for i, match in enumerate(_NOTE_NUMBER.finditer(value)):
            yield (*path, i, match.group(1)), match.group(2)


def export_numbers(out: Path) -> dict[tuple, Any]:
    """Every number of the exported files (JSON, the Hub's YAML, a model card's front
    matter), by file (in name order) and place, the export's own date and ids left out."""
    found: dict[tuple, Any] = {}
    files = sorted(p for p in out.rglob("*") if p.is_file())
    for i, path in enumerate(files):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix == ".jsonl":
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        elif path.suffix == ".md":
            data = yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else None
        else:
            data = yaml.safe_load(text)
        for place, value in _leaves(data):
            found[(i, *place)] = value
    return found


def run_numbers(out: Path) -> dict[tuple, Any]:
    """A written run's numbers: its results files' ``claims`` and each sample's per-document
    values (by task, line and metric; its loglikelihoods are what it was given)."""
    found = results_claims(out)
    for path in sorted(out.rglob("samples_*.jsonl")):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            sample = json.loads(line)
            for key, value in sample.items():
                if key == "doc_id" or scoring.metric_named(key) is not None:
                    found[("samples", task, i, key)] = _claimed(value)
    return found


# ---------------------------------------------------------------- the oracle


@dataclass
class Check:
    """One command on one case, and what the oracle says of it."""

    command: str
    outcome: Outcome
    problems: list[str] = field(default_factory=list)


def refusal_problems(command: str, outcome: Outcome) -> list[str]:
    """What is wrong with how a command ended, whatever it decided."""
    if outcome.died:
        return ["the process died"]
    if outcome.hang:
        return [f"hung (no answer within {outcome.seconds:.0f} s)"]
    if outcome.blocked:
        return ["hung: blocked opening a FIFO, waiting for a writer"]
    if outcome.error is not None:
        last = outcome.error.strip().splitlines()[-1]
        return [f"traceback: {last}"]
    if outcome.status == 0:
        return []
    if outcome.status not in (1, 2):
        return [f"exit status {outcome.status}"]
    if "Traceback (most recent call last)" in outcome.err:
        return ["a traceback on stderr"]
    prefix = f"dcpmi {command}: "
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith(prefix)]
    stray = [line for line in lines if not line.startswith(prefix) and not _logged(line)]
    if not ours:
        return [f"refused (status {outcome.status}) without a line starting {prefix!r}"]
    if stray:
        return [f"refusal not on one line: {stray[0][:160]!r}"]
    if command != "verify" and len(ours) != 1:
        return [f"{len(ours)} lines of refusal"]
    return []


_LOGGED = re.compile(r"^(\d{4}-\d\d-\d\d[: ]\S+ +(DEBUG|INFO|WARNING)\b|\S+Warning: |  warnings\.)")


def _logged(line: str) -> bool:
    """A line some library logged (lm-eval's logger, Python's warnings), not the command's."""
    return bool(_LOGGED.match(line))
