"""The fuzz tier's ``dcpmi`` process (tests/test_fuzz.py, through ``fuzz_helpers.CliWorker``).

Runs ``dcpmi`` commands one after the other in one process, as ``cli.main(argv)``: the
model's tokenizer, the task index and the data are loaded once, and each later command
takes a fraction of a second instead of a fresh process's ~20 s. One JSON request a line on
stdin (``{"argv": [...], "cwd": "..."}``); one JSON answer a line on the descriptor that
was stdout at start (``{"status", "out", "err", "error", "seconds"}``), while each
command's own stdout and stderr (file descriptors 1 and 2, so whatever a library's logger
or C code writes too) go to files that the answer returns. ``error`` is the traceback of
an exception that escaped ``main`` (``status`` is then None): what a user would have seen
instead of a one-line refusal.

Its address space is capped (``RLIMIT_AS``, ``DCPMI_FUZZ_MEMORY_GIB`` over what it holds
after start-up) so that a count read from a file cannot take the machine's memory: the
command then fails with ``MemoryError``, which the fuzz tier reports. The parent kills it
when a command hangs, and starts another.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
import traceback


def _capped() -> None:
    """Cap the address space at what the process maps now plus the allowance."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    allowance = float(os.environ.get("DCPMI_FUZZ_MEMORY_GIB", "2")) * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (int(mapped + allowance), resource.RLIM_INFINITY))


def _run(argv: list[str], cwd: str) -> dict:
    from lm_eval_dcpmi import cli

    with (
        tempfile.TemporaryFile("w+b") as out,
        tempfile.TemporaryFile("w+b") as err,
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        status, error, start = None, None, time.monotonic()
        try:
            os.chdir(cwd)
            status = cli.main(argv)
        except SystemExit as exit_:  # argparse's refusals
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException:  # noqa: BLE001 - the finding itself
            error = traceback.format_exc()
        finally:
            seconds = time.monotonic() - start
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        err.seek(0)
        return {
            "status": status,
            "out": out.read().decode("utf-8", "backslashreplace"),
            "err": err.read().decode("utf-8", "backslashreplace"),
            "error": error,
            "seconds": seconds,
        }


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing else may write between answers
    from lm_eval_dcpmi import cli  # noqa: F401 - imported once, before the cap

    capped = False
    for line in sys.stdin:
        request = json.loads(line)
        if not capped and request.get("cap", True):
            _capped()
            capped = True
        answers.write(json.dumps(_run(request["argv"], request["cwd"])) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
