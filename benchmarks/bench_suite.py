"""What the whole suite costs with ``hf`` and ``hf-prefix``: tokens, wall time, projection.

For every task (default: the paper's 16), in one process with the model loaded once:

1. **Count** (full split, no forward pass): build all requests with lm-eval (timed),
   encode them as ``HFLM.loglikelihood`` does (timed), and count the token positions
   each method forwards: ``hf`` (every distinct input ``context + continuation[:-1]``
   whole), ``per-context`` (the 0.1 ``hf-prefix``: each distinct context once, then its
   continuations), ``hf-prefix`` (the prefix tree: every shared prefix once, across
   documents), and the positions ``hf-prefix``'s plan pads its rows to.
2. **Time** (a sample): blocks of consecutive documents spread evenly over the split
   (consecutive, so that RACE questions on one article stay together), scored by
   ``hf`` and by ``hf-prefix`` on the same encoded requests. Each request's two
   loglikelihoods must agree within 1e-4 and every document's predictions under every
   method must be equal. Wall time and forwarded positions are measured.
3. **Project**: a backend's full-split time is its sample time scaled by its full-split
   over sample token count.

Usage (from the project root; the data folder as for the tests)::

    DCPMI_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_suite.py \\
        --out docs/benchmarks --threads 2

writes ``suite_<label>.json`` and ``suite_<label>.md``. ``--share`` sets the sample's
size (share of the task's ``hf`` tokens); ``--tasks`` a comma-separated subset;
``--no-time`` counts only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOLERANCE = 1e-4
Encoded = tuple[Any, list[int], list[int]]


def encode(lm: Any, instances: Sequence[Any]) -> list[Encoded]:
    """The requests as ``HFLM._loglikelihood_tokens`` receives them (lm-eval's own
    encoding: ``loglikelihood`` runs with a recorder in place of the scoring)."""
    recorded: list[Encoded] = []

    def record(requests: list[Encoded], *args: Any, **kwargs: Any) -> list[tuple[float, bool]]:
        recorded.extend(requests)
        return [(0.0, False)] * len(requests)

    lm._loglikelihood_tokens = record  # instance attribute: shadows the method
    try:
        lm.loglikelihood(list(instances), disable_tqdm=True)
    finally:
        del lm._loglikelihood_tokens
    return recorded


def token_counts(requests: Sequence[Encoded], lm: Any) -> dict[str, int]:
    """Positions each method forwards for ``requests`` (none left-truncated here)."""
    from lm_eval_dcpmi.hf_prefix.schedule import Pass, plan, unique_pairs
    from lm_eval_dcpmi.hf_prefix.tree import build_tree, tree_tokens

    pairs = list(unique_pairs(requests))
    inputs = {context + continuation[:-1] for context, continuation in pairs}
    contexts = {context for context, _ in pairs}
    padded = sum(
        len(step.rows) * step.width
        for step in plan(build_tree(pairs), lm._budget(int(lm.batch_size), pairs, lm._setup))
        if isinstance(step, Pass)
    )
    return {
        "hf": sum(map(len, inputs)),
        "per_context": sum(map(len, contexts)) + sum(len(c) - 1 for _, c in pairs),
        "hf_prefix": tree_tokens(build_tree(pairs)),
        "hf_prefix_padded": padded,
    }


def sample_documents(doc_ids: Sequence[int], want: int, blocks: int) -> list[int]:
    """About ``want`` documents in ``blocks`` runs of consecutive ids, evenly spread."""
    if want >= len(doc_ids):
        return list(doc_ids)
    blocks = max(1, min(blocks, want))
    size = max(1, want // blocks)
    step = len(doc_ids) / blocks
    chosen: list[int] = []
    for b in range(blocks):
        start = int(b * step)
        chosen.extend(doc_ids[start : start + size])
    return sorted(set(chosen))


class Forwarded:
    """Counts the positions (padding included) and calls of a model's forward passes."""

    def __init__(self, model: Any) -> None:
        self.model, self.positions, self.calls = model, 0, 0

    def __enter__(self) -> Forwarded:
        def count(_module: Any, args: tuple, kwargs: dict) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.positions += int(ids.numel())
            self.calls += 1

        self.handle = self.model.register_forward_pre_hook(count, with_kwargs=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.handle.remove()


def predictions(task: Any, by_doc: dict[int, list[Any]], answers: dict[int, list[float]]) -> list:
    """Every document's predicted option under every method (``scoring.predictions``)."""
    from lm_eval_dcpmi.rules.scoring import METRICS, DocumentScores
    from lm_eval_dcpmi.rules.scoring import predictions as predict

    out = []
    rules = [m for m in METRICS if m.scope == "every"]  # the five every task has
    for doc_id, (instances, encoded) in sorted(by_doc.items()):
        n, carrier = task.layout.n_options([i.arguments[1] for i in instances])
        blocks = task.layout.blocks(answers[doc_id], n, carrier)
        n_tokens = [len(cont) for _, _, cont in encoded[:n]]
        n_chars = [len(choice) for choice in task.doc_to_choice(instances[0].doc)]
        scores = DocumentScores(blocks.conditional, blocks.references, n_tokens, n_chars)
        out.append(predict(scores, rules))
    return out


def run_task(name: str, manager: Any, lm: Any, args: argparse.Namespace) -> dict[str, Any]:
    from lm_eval.models.huggingface import HFLM

    started = time.perf_counter()
    task = manager.load([name])["tasks"][name]
    task.build_all_requests(limit=None, rank=0, world_size=1)
    built = time.perf_counter()
    instances = sorted(task.instances, key=lambda i: (i.doc_id, i.idx))
    requests = encode(lm, instances)
    encoded = time.perf_counter()
    full = token_counts(requests, lm)
    row: dict[str, Any] = {
        "task": name,
        "documents": len({i.doc_id for i in instances}),
        "requests": len(instances),
        "build_s": round(built - started, 1),
        "encode_s": round(encoded - built, 1),
        "count_s": round(time.perf_counter() - encoded, 1),
        "tokens": full,
    }
    if args.no_time:
        return row
    by_doc: dict[int, tuple[list[Any], list[Encoded]]] = {}
    for instance, request in zip(instances, requests, strict=True):
        docs, reqs = by_doc.setdefault(instance.doc_id, ([], []))
        docs.append(instance)
        reqs.append(request)
    want = max(args.min_docs, round(len(by_doc) * args.share))
    chosen = sample_documents(sorted(by_doc), want, args.blocks)
    sample = {d: by_doc[d] for d in chosen}
    sample_requests = [r for d in chosen for r in sample[d][1]]
    row["sample_documents"] = len(chosen)
    row["sample_tokens"] = token_counts(sample_requests, lm)
    timed: dict[str, Any] = {}
    results: dict[str, list[tuple[float, bool]]] = {}
    for backend in ("hf", "hf_prefix"):
        score = lm._loglikelihood_tokens if backend == "hf_prefix" else None
        with Forwarded(lm.model) as counter:
            start = time.perf_counter()
            if score is None:  # HFLM's own scoring on the same object
                results[backend] = HFLM._loglikelihood_tokens(lm, sample_requests, True)
            else:
                results[backend] = score(sample_requests, True)
            wall = time.perf_counter() - start
        timed[backend] = {
            "wall_s": round(wall, 2),
            "forward_calls": counter.calls,
            "forwarded_positions": counter.positions,
            "projected_full_s": round(
                wall * full[backend] / max(1, row["sample_tokens"][backend]), 1
            ),
        }
    pairs = list(zip(results["hf"], results["hf_prefix"], strict=True))
    row["max_abs_loglik_diff"] = max(abs(a[0] - b[0]) for a, b in pairs)
    row["is_greedy_equal"] = all(a[1] == b[1] for a, b in pairs)
    answers = {}
    for backend, values in results.items():
        position, per_doc = 0, {}
        for d in chosen:
            n = len(sample[d][0])
            per_doc[d] = [ll for ll, _ in values[position : position + n]]
            position += n
        answers[backend] = predictions(task, sample, per_doc)
    row["predictions_equal"] = answers["hf"] == answers["hf_prefix"]
    row["timing"] = timed
    return row


def machine() -> dict[str, Any]:
    import importlib.metadata
    import re

    import torch

    cpu = "unknown"
    if Path("/proc/cpuinfo").exists():
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = found.group(1).strip() if found else cpu
    return {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "cpu": cpu,
        "cpus": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": os.getloadavg(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": {
            p: importlib.metadata.version(p)
            for p in ("torch", "transformers", "lm_eval", "lm-eval-dcpmi")
        },
    }


def markdown(report: dict[str, Any]) -> str:
    rows = report["tasks"]
    lines = [
        f"# hf vs hf-prefix, {report['machine']['date']}",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cpus']} CPUs, "
        f"{report['machine']['torch_threads']} torch threads; batch size {report['batch_size']}; "
        f"model {report['model']}.",
        "",
        "| task | docs | build s | encode s | hf tokens | per-context | hf-prefix | "
        "hf / hf-prefix | sample docs | hf s | hf-prefix s | speed-up | projected hf s | "
        "projected hf-prefix s | max abs dll | same picks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    totals = {"hf": 0.0, "hf_prefix": 0.0, "build": 0.0, "encode": 0.0}
    tokens = {"hf": 0, "per_context": 0, "hf_prefix": 0}
    for row in rows:
        t, timing = row["tokens"], row.get("timing")
        for key in tokens:
            tokens[key] += t[key]
        totals["build"] += row["build_s"]
        totals["encode"] += row["encode_s"]
        cells = [
            row["task"],
            row["documents"],
            row["build_s"],
            row["encode_s"],
            f"{t['hf']:,}",
            f"{t['per_context']:,}",
            f"{t['hf_prefix']:,}",
            f"{t['hf'] / t['hf_prefix']:.2f}",
        ]
        if timing:
            hf, prefix = timing["hf"], timing["hf_prefix"]
            totals["hf"] += hf["projected_full_s"]
            totals["hf_prefix"] += prefix["projected_full_s"]
            cells += [
                row["sample_documents"],
                hf["wall_s"],
                prefix["wall_s"],
                f"{hf['wall_s'] / prefix['wall_s']:.2f}",
                f"{hf['projected_full_s']:,.0f}",
                f"{prefix['projected_full_s']:,.0f}",
                f"{row['max_abs_loglik_diff']:.1e}",
                "yes" if row["predictions_equal"] and row["is_greedy_equal"] else "**NO**",
            ]
        else:
            cells += [""] * 8
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append(
        f"| **all** | {sum(r['documents'] for r in rows):,} | {totals['build']:.0f} | "
        f"{totals['encode']:.0f} | {tokens['hf']:,} | {tokens['per_context']:,} | "
        f"{tokens['hf_prefix']:,} | {tokens['hf'] / max(1, tokens['hf_prefix']):.2f} | | | | | "
        f"{totals['hf'] / 3600:.2f} h | {totals['hf_prefix'] / 3600:.2f} h | | |"
    )
    return "\n".join(lines) + "\n"


def load_model(batch_size: int, threads: int | None) -> tuple[Any, Any, dict[str, Any]]:
    """The embedded model as ``hf-prefix`` on the CPU (``threads`` torch threads), a
    TaskManager that knows the plugin's tasks, and the model arguments."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import embedded, task_configs_dir
    from lm_eval_dcpmi.hf_prefix.lm import PrefixHFLM

    model_args = embedded.model_args()
    lm = PrefixHFLM(**model_args, device="cpu", batch_size=batch_size)
    manager = TaskManager(include_path=str(task_configs_dir()), metadata=model_args)
    return lm, manager, model_args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=None, help="comma-separated (default: the 16)")
    parser.add_argument("--share", type=float, default=0.02, help="sample share of documents")
    parser.add_argument("--min-docs", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=8, help="runs of consecutive documents")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--no-time", action="store_true", help="count tokens only")
    parser.add_argument("--label", default=None, help="output name suffix (default: date)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    args = parser.parse_args()

    from lm_eval_dcpmi import paper

    lm, manager, model_args = load_model(args.batch_size, args.threads)
    report: dict[str, Any] = {
        "machine": machine(),
        "model": model_args["gguf_file"],
        "batch_size": args.batch_size,
        "share": args.share,
        "tasks": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    label = args.label or report["machine"]["date"][:10]
    for name in args.tasks.split(",") if args.tasks else paper.paper_order():
        row = run_task(name, manager, lm, args)
        report["tasks"].append(row)
        print(json.dumps(row), flush=True)
        (args.out / f"suite_{label}.json").write_text(json.dumps(report, indent=1))
        (args.out / f"suite_{label}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
