"""Score tasks in shards that survive the session, then merge them into one run.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/score_parts.py \\
        --tasks dcpmi_hellaswag --shards 4 --folder out/hellaswag -- --model hf-prefix

A thin caller of the plugin's own mechanism: shard K is ``dcpmi run --shard K/N
--log_samples`` (every option after ``--`` too) with ``--output_path FOLDER/shard-K-of-N``,
written into a temporary folder beside it and renamed into place only when the run ends
well, so a shard folder that is there is whole. Shards already there are skipped: the same
command resumes. When all N are there, ``dcpmi merge`` joins them into ``FOLDER/merged``
(``--no-merge``: not yet). SIGTERM or Ctrl-C stops the running ``dcpmi run`` with it (the
child is sent the same signal and waited for) and removes its temporary folder: exit
status 143 or 130, nothing left behind.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from pathlib import Path

DCPMI = str(Path(sys.executable).with_name("dcpmi"))


def shard_folder(folder: Path, index: int, count: int) -> Path:
    return folder / f"shard-{index}-of-{count}"


def run_child(command: list[str], temporary: Path) -> int:
    """``command`` as a child that stops when this process is told to stop."""
    child = subprocess.Popen(command)
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        # only pass it on: the wait below is interrupted, not ended (calling child.wait()
        # here would wait for the lock the interrupted wait holds)
        stopping.append(signum)
        child.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        status = child.wait()
    except KeyboardInterrupt:  # the terminal sent the child SIGINT too
        child.wait()
        stopping.append(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if stopping:
        shutil.rmtree(temporary, ignore_errors=True)
        how = "interrupted" if stopping[0] == signal.SIGINT else "stopped by SIGTERM"
        print(f"score_parts: {how}; {temporary} removed.", file=sys.stderr)
        raise SystemExit(128 + stopping[0])
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", required=True, help="as for dcpmi run")
    parser.add_argument("--shards", type=int, required=True, help="how many shards in all")
    parser.add_argument("--folder", type=Path, required=True, help="where the shards go")
    parser.add_argument("--only", type=int, help="score at most this many shards, then stop")
    parser.add_argument("--no-merge", action="store_true", help="do not merge when all are there")
    parser.add_argument("extra", nargs="*", help="after --: more options for dcpmi run")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards: 1 or more")
    todo = [
        k
        for k in range(1, args.shards + 1)
        if not shard_folder(args.folder, k, args.shards).is_dir()
    ]
    done = args.shards - len(todo)
    print(f"score_parts: {done} of {args.shards} shards there; scoring {todo[: args.only]}")
    args.folder.mkdir(parents=True, exist_ok=True)
    for k in todo[: args.only]:
        target = shard_folder(args.folder, k, args.shards)
        temporary = target.with_name(target.name + ".running")
        shutil.rmtree(temporary, ignore_errors=True)  # a run stopped without its clean-up
        command = [DCPMI, "run", "--tasks", args.tasks, "--shard", f"{k}/{args.shards}",
                   "--log_samples", "--output_path", str(temporary), *args.extra]  # fmt: skip
        status = run_child(command, temporary)
        if status != 0:
            shutil.rmtree(temporary, ignore_errors=True)
            print(f"score_parts: shard {k}/{args.shards} failed (exit {status}).", file=sys.stderr)
            return status
        temporary.rename(target)
        print(f"score_parts: shard {k}/{args.shards} -> {target}")
    shards = [shard_folder(args.folder, k, args.shards) for k in range(1, args.shards + 1)]
    if args.no_merge or not all(s.is_dir() for s in shards):
        return 0
    merged = args.folder / "merged"
    if merged.exists():
        print(f"score_parts: {merged} is there already.")
        return 0
    return subprocess.call([DCPMI, "merge", *map(str, shards), "--out", str(merged)])


if __name__ == "__main__":
    raise SystemExit(main())
