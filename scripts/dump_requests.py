"""One sha256 per task over its requests, and one over its per-document metrics.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/dump_requests.py --limit 300

Builds the tasks of a group (default ``dcpmi``) with lm-eval's ``TaskManager`` and prints,
per task, the document count, a digest of every instance's ``(doc_id, idx, arguments)``
in lm-eval's order, and a digest of the metrics ``process_results`` gives each document
for made-up loglikelihoods (a fixed function of each request's text, so no model runs).
Run it before and after a refactoring: equal lines mean the same requests, byte for
byte, and the same per-document metrics.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import struct
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def fake_loglikelihood(arguments: tuple) -> float:
    """A negative number fixed by the request's text, with ties and -inf now and then,
    so that the tie rule and the unranked path are exercised too."""
    digest = hashlib.sha256(json.dumps(list(arguments)).encode("utf-8")).digest()
    value = struct.unpack(">I", digest[:4])[0]
    if value % 97 == 0:
        return -math.inf
    return -float(value % 50) / 4.0  # coarse, so that ties happen


def task_digests(task: Any, limit: int | None) -> dict[str, Any]:
    """Document count and the request and metric digests of one built task."""
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    requests = hashlib.sha256()
    by_doc: dict[int, list[Any]] = {}
    for instance in task.instances:
        line = [instance.doc_id, instance.idx, list(instance.arguments)]
        requests.update(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
        by_doc.setdefault(instance.doc_id, []).append(instance)
    metrics = hashlib.sha256()
    for doc_id, instances in by_doc.items():
        instances.sort(key=lambda instance: instance.idx)
        results = [(fake_loglikelihood(i.arguments), False) for i in instances]
        scores = task.process_results(instances[0].doc, results)
        # repr keeps NaN and the exact float; sorted keys, for a stable line
        line = repr([doc_id, sorted(scores.items())])
        metrics.update(line.encode("utf-8") + b"\n")
    return {
        "documents": len(by_doc),
        "requests": len(task.instances),
        "requests_sha256": requests.hexdigest(),
        "metrics_sha256": metrics.hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="documents per task (default all)")
    parser.add_argument("--group", default="dcpmi", help="a group or comma-separated tasks")
    parser.add_argument(
        "--no-tokenizer",
        action="store_true",
        help="build without the embedded model's tokenizer (acc_avg and truncated NaN)",
    )
    args = parser.parse_args()

    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import embedded

    # The tokenizer gives the token counts (acc_avg, truncated): with it, the metric
    # digest covers every metric.
    metadata = {} if args.no_tokenizer else embedded.model_args()
    manager = TaskManager(metadata=metadata)
    tasks = manager.load(args.group.split(","))["tasks"]  # a group's tasks, by name
    for name in sorted(tasks):
        print(json.dumps({"task": name, **task_digests(tasks[name], args.limit)}), flush=True)


if __name__ == "__main__":
    main()
