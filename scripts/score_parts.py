"""Score one task's full split in parts that survive the session: each part is its own
``dcpmi run --samples`` and lands in ``docs/parts/<task>/`` as soon as it ends.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/score_parts.py \\
        --task dcpmi_hellaswag --parts 8

A part is a contiguous range of document indices (part ``i`` of ``N``: documents
``i*n//N`` to ``(i+1)*n//N - 1``). Parts already in the folder are skipped, so running
the same command again resumes where the last one stopped (commit the folder between
sessions: the answer cache does not travel). Score every part of a split with the same
commit (each part records it): lm-eval records the task's config, loaders' source
included, and parts whose configs differ do not join. Each part's results file records its range,
its wall time (model load included) and the machine (``dcpmi_part``); its samples are
trimmed as ``make_results.py --add`` trims them. When every part is there,
``make_results.py --join docs/parts/<task> --set full`` writes one results file of the
whole split.

Give the run the machine alone: its times go into the suite's benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lm_eval_dcpmi.leaderboard.portable import read_json, write_json
from lm_eval_dcpmi.report import pages

ROOT = Path(__file__).resolve().parents[1]


def part_range(index: int, parts: int, documents: int) -> range:
    """Part ``index`` (0-based) of ``parts`` contiguous parts of ``documents``."""
    return range(index * documents // parts, (index + 1) * documents // parts)


def parts_done(folder: Path, task: str) -> dict[int, Path]:
    """The parts (index: results file) already in ``folder``."""
    done: dict[int, Path] = {}
    for path in sorted(folder.glob("results_*.json")):
        part = read_json(path).get("dcpmi_part") or {}
        if part.get("task") == task:
            done[int(part["index"])] = path
    return done


def code() -> dict[str, Any]:
    """The commit the part is scored with, and whether the tree had changes: parts of one
    split join only when their results files agree, and the task configs lm-eval records
    hold the loaders' source."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"commit": git("rev-parse", "HEAD"), "changed": bool(git("status", "--porcelain"))}


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": list(os.getloadavg())}


def score_part(args: argparse.Namespace, index: int, documents: int, folder: Path) -> Path:
    indices = list(part_range(index, args.parts, documents))
    with tempfile.TemporaryDirectory(prefix="dcpmi-part-") as tmp:
        samples = Path(tmp) / "samples.json"
        samples.write_text(json.dumps({args.task: indices}))
        before = machine()
        start = time.perf_counter()
        command = [
            str(Path(sys.executable).parent / "dcpmi"), "run", "--model", args.model,
            "--tasks", args.task, "--samples", str(samples), "--log_samples",
            "--output_path", str(Path(tmp) / "out"), *args.extra,
        ]  # fmt: skip
        subprocess.run(command, check=True)
        seconds = time.perf_counter() - start
        (results,) = Path(tmp, "out").rglob("results_*.json")
        written = pages.add_run(results, "unused", root=Path(tmp) / "added")
        data = read_json(written[0])
        original = data["n-samples"][args.task]["original"]
        if original != documents:
            raise SystemExit(
                f"{args.task} has {original} documents, not --documents {documents}: "
                f"rerun with --documents {original} (parts of another size would not join)."
            )
        data["dcpmi_part"] = {
            "task": args.task,
            "index": index,
            "parts": args.parts,
            "first": indices[0],
            "last": indices[-1],
            "documents": documents,
            "wall_seconds": round(seconds, 1),
            "before": before,
            "after": machine(),
            "code": code(),
            "command": " ".join(command[1:])
            .replace(str(samples), "<part's --samples file>")
            .replace(tmp, "<tmp>"),
        }
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / written[0].name, data)
        for path in written[1:]:
            (folder / path.name).write_bytes(path.read_bytes())
        return folder / written[0].name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--parts", type=int, required=True, help="how many parts in all")
    parser.add_argument("--documents", type=int, required=True, help="the split's size")
    parser.add_argument("--model", default="hf-prefix")
    parser.add_argument("--folder", type=Path, help="default: docs/parts/<task>")
    parser.add_argument("--only", type=int, help="score at most this many parts, then stop")
    parser.add_argument("extra", nargs="*", help="after --: more options for dcpmi run")
    args = parser.parse_args(argv)
    folder = args.folder or ROOT / "docs" / "parts" / args.task
    done = parts_done(folder, args.task)
    todo = [i for i in range(args.parts) if i not in done][: args.only]
    print(f"{args.task}: {len(done)} of {args.parts} parts done; scoring {todo}", flush=True)
    for index in todo:
        path = score_part(args, index, args.documents, folder)
        print(f"{args.task}: part {index} of {args.parts} -> {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
