"""Score the embedded model on every dcpmi task, one task at a time, timing each.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/evaluate_tasks.py --limit 50

Loads the model once, runs lm-eval's `simple_evaluate` per task (so each task's wall
time is known), and writes one lm-eval-style results file (readable by
`dcpmi report`) plus `results.md`, the README's table with a time column.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="documents per task (default all)")
    parser.add_argument("--tasks", default=None, help="comma-separated (default all 16)")
    parser.add_argument("--model", default="hf", help="hf or hf-prefix")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from lm_eval import simple_evaluate
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import handle_non_serializable

    from lm_eval_dcpmi import embedded, paper, report
    from lm_eval_dcpmi.scoring import METHODS

    model_args = embedded.model_args()
    lm = get_model(args.model)(**model_args, device="cpu", batch_size=args.batch_size)
    task_manager = TaskManager(metadata=model_args)
    merged: dict = {}
    seconds: dict[str, float] = {}
    for task in args.tasks.split(",") if args.tasks else paper.paper_order():
        start = time.perf_counter()
        results = simple_evaluate(
            model=lm, tasks=[task], limit=args.limit, task_manager=task_manager
        )
        seconds[task] = round(time.perf_counter() - start, 1)
        print(f"{task}: {seconds[task]} s", flush=True)
        for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
            merged.setdefault(key, {}).update(results.get(key, {}))
        merged["config"] = results["config"] | {"model": args.model, "model_args": model_args}
    merged["dcpmi_task_seconds"] = seconds
    merged["dcpmi_threads"] = args.threads
    merged["date"] = time.time()

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    results_file = args.out / f"results_{stamp}.json"
    results_file.write_text(json.dumps(merged, indent=2, default=handle_non_serializable))
    (run,) = report.load_results([results_file])
    table = report.markdown_table(run)
    lines = table.splitlines()
    lines[0] += " Time (s) |"
    lines[1] += "---:|"
    for i, row in enumerate(run.rows, start=2):
        lines[i] += f" {seconds.get(row.task, '')} |"
    means = [sum(row.scores[m] for row in run.rows) / len(run.rows) * 100 for m in METHODS]
    lines.append(
        f"| *mean ({len(run.rows)} tasks)* | | "
        + " | ".join(f"{m:.1f}" for m in means)
        + f" | {sum(seconds.values()):.0f} |"
    )
    text = "\n".join(lines) + "\n"
    (args.out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
