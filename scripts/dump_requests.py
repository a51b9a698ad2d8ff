"""One sha256 per task over its requests, one over its per-document metrics, one over its
config.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/dump_requests.py --limit 300

Builds the tasks of a group (default ``dcpmi``) with lm-eval's ``TaskManager`` and prints,
per task, the document count, a digest of every instance's ``(doc_id, idx, arguments)``
in lm-eval's order, a digest of the metrics ``process_results`` gives each document for
made-up loglikelihoods (a fixed function of each request's text, so no model runs), and a
digest of the config lm-eval records for the task (``dump_config``). Run it before and
after a refactoring: equal lines mean the same requests, byte for byte, the same
per-document metrics and the same recorded config.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import struct
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lm_eval_dcpmi.rules import _scoring as scoring  # noqa: E402  (after the offline switches)


def fake_loglikelihood(arguments: tuple) -> float:
    """A negative number fixed by the request's text, with ties and -inf now and then,
    so that the tie rule and the unranked path are exercised too."""
    digest = hashlib.sha256(json.dumps(list(arguments)).encode("utf-8")).digest()
    value = struct.unpack(">I", digest[:4])[0]
    if value % 97 == 0:
        return -math.inf
    return -float(value % 50) / 4.0  # coarse, so that ties happen


def _before_calibration(task: Any, instances: list[Any]) -> list[Any]:
    """The instances without the carrier's content-free requests (CC, 0.2.0)."""
    if not task.layout.content_free:
        return instances
    by_doc: dict[int, list[Any]] = {}
    for instance in instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    kept = []
    for instance in instances:
        n, _carrier = task.layout.n_options([i.arguments[1] for i in by_doc[instance.doc_id]])
        if instance.idx < task.layout.n_requests(n, carrier=False):
            kept.append(instance)
    return kept


# What CC and BC added: the table's accuracies on a fixed label set.
CALIBRATIONS = frozenset(m.name for m in scoring.METRICS if m.scope == "fixed_labels")


def _recorded(value: Any) -> str:
    """A config value JSON cannot hold, as a results file records it: a function by its
    source (lm-eval's ``serialize_function``), anything else as text."""
    if callable(value):
        try:
            return inspect.getsource(value)
        except (OSError, TypeError):
            return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    return str(value)


def task_digests(task: Any, limit: int | None, before_calibration: bool = False) -> dict[str, Any]:
    """Document count and the request and metric digests of one built task;
    ``before_calibration``: without what CC and BC added (content-free requests, acc_cc and
    acc_bc), to compare with digests made before them."""
    task.build_all_requests(limit=limit, rank=0, world_size=1)
    for instance in task.instances:  # as lm-eval's evaluator stores each answer
        instance.resps = [(fake_loglikelihood(instance.arguments), False)]
    requests = hashlib.sha256()
    by_doc: dict[int, list[Any]] = {}
    digested = _before_calibration(task, task.instances) if before_calibration else task.instances
    for instance in digested:
        line = [instance.doc_id, instance.idx, list(instance.arguments)]
        requests.update(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
        by_doc.setdefault(instance.doc_id, []).append(instance)
    metrics = hashlib.sha256()
    full = {}
    for instance in task.instances:
        full.setdefault(instance.doc_id, []).append(instance)
    for doc_id in by_doc:
        instances = sorted(full[doc_id], key=lambda instance: instance.idx)
        results = [i.resps[0] for i in instances]
        scores = task.process_results(instances[0].doc, results)
        if before_calibration:
            scores = {k: v for k, v in scores.items() if k not in CALIBRATIONS}
        # repr keeps NaN and the exact float; sorted keys, for a stable line
        line = repr([doc_id, sorted(scores.items())])
        metrics.update(line.encode("utf-8") + b"\n")
    # The task's config as lm-eval records it in a results file's `configs` (function
    # sources included: a loader's or an aggregation's text changed is a change there).
    config = json.dumps(task.dump_config(), sort_keys=True, default=_recorded, ensure_ascii=False)
    return {
        "documents": len(by_doc),
        "requests": len(digested),
        "requests_sha256": requests.hexdigest(),
        "metrics_sha256": metrics.hexdigest(),
        "config_sha256": hashlib.sha256(config.encode("utf-8")).hexdigest(),
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
    parser.add_argument(
        "--before-calibration",
        action="store_true",
        help="leave out what contextual and batch calibration added (the content-free "
        "requests, acc_cc, acc_bc): digests comparable with those made before them",
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
        digests = task_digests(tasks[name], args.limit, args.before_calibration)
        print(json.dumps({"task": name, **digests}), flush=True)


if __name__ == "__main__":
    main()
