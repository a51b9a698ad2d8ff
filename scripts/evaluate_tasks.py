"""Score the embedded model on every dcpmi task, one task at a time, timing each.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/evaluate_tasks.py --limit 100

Loads the model once, runs lm-eval's `simple_evaluate` per task (so each task's wall
time is known, `dcpmi_task_seconds`), and writes one lm-eval-style results file
(readable by `dcpmi report`) into docs/results/full (no --limit) or
docs/results/limit<N>; then `scripts/make_results.py` makes the reports and the
README's tables from it.
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
    parser.add_argument(
        "--out", type=Path, default=None, help="default docs/results/full or .../limit<N>"
    )
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

    if args.out is None:
        args.out = Path("docs/results") / ("full" if args.limit is None else f"limit{args.limit}")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    results_file = args.out / f"results_{stamp}.json"
    results_file.write_text(json.dumps(merged, indent=2, default=handle_non_serializable))
    (run,) = report.load_results([results_file])
    print(report.format_run(run))
    print(f"wrote {results_file}; now run scripts/make_results.py")


if __name__ == "__main__":
    main()
