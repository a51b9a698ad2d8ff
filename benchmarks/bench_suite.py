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
   loglikelihoods should agree within 1e-4 and every document's predictions under every
   method be equal: the record says whether they do (``within_tolerance``; printed when
   not, and listed by ``--summary``). Wall time and forwarded positions are measured.
3. **Project**: a backend's full-split time is its sample time scaled by its full-split
   over sample token count.

Usage (from the project root; the data folder as for the tests)::

    DCPMI_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_suite.py \\
        --out results/benchmarks --threads 2

writes ``suite_<label>.json`` and ``suite_<label>.md``. ``--share`` sets the sample's
size (share of the task's ``hf`` tokens); ``--tasks`` a comma-separated subset;
``--no-time`` counts only.

**The suite, timed** (``--full DIR``): the above, then ``hf-prefix`` on the task's whole
split, timed (model load and request building apart), with the positions it forwards,
the useful FLOPs (``common.useful_flops``), and the matmul peak of the same
process at the model's shapes (``torch.matmul``, the threads torch has). Efficiency is
the time the useful FLOPs take at that peak over the measured wall. Each task is its own
record, ``DIR/<task>.json`` (``DIR/<task>.part-K-of-N.json`` with ``--part K/N``: the
K-th of N runs of consecutive documents), with the machine's load before and after:
no full suite fits in one session on 2 cores, so a run skips the records that exist
and the suite is timed over several sessions, each task on an idle machine.
``--summary DIR`` joins the records into ``DIR/suite.json`` and ``DIR/suite.md``; the
suite's total is given only when every task of the 16 is recorded whole.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (
    TOLERANCE,
    Encoded,
    Parser,
    encode,
    load_model,
    machine,
    matmul_peak,
    model_shapes,
    run_main,
    sample_documents,
    useful_flops,
)
from suite_pages import markdown, summary, summary_markdown, within_tolerance


def token_counts(requests: Sequence[Encoded], lm: Any) -> dict[str, int]:
    """Positions each method forwards for ``requests`` (none left-truncated here)."""
    from lm_eval_dcpmi.hf_prefix._schedule import Pass, plan, unique_pairs
    from lm_eval_dcpmi.hf_prefix._tree import build_tree, tree_tokens

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
    """Every document's predicted option under every method (``rules._scoring.predictions``)."""
    from lm_eval_dcpmi.rules._scoring import METRICS, DocumentScores
    from lm_eval_dcpmi.rules._scoring import predictions as predict

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
    if getattr(args, "part", None):  # the K-th of N runs of consecutive documents
        k, n = args.part
        ids = sorted({i.doc_id for i in instances})
        kept = set(ids[len(ids) * (k - 1) // n : len(ids) * k // n])
        instances = [i for i in instances if i.doc_id in kept]
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
    # Recorded, not fatal: the timing stands; the summary lists the samples that differ.
    row["within_tolerance"] = within_tolerance(row)
    if not row["within_tolerance"]:
        same = "equal" if row["predictions_equal"] else "DIFFERENT"
        print(f"{name}: hf-prefix differs from hf on the sample: largest |dll| "
              f"{row['max_abs_loglik_diff']:.2e} (tolerance {TOLERANCE:g}), predictions "
              f"{same}", file=sys.stderr)  # fmt: skip
    row["timing"] = timed
    if getattr(args, "full", None):
        row["full_split"] = time_full_split(lm, requests)
        row["full_split"]["hf_projected_s"] = timed["hf"]["projected_full_s"]
    return row


def time_full_split(lm: Any, requests: Sequence[Encoded]) -> dict[str, Any]:
    """``hf-prefix`` over every request of the split: wall, CPU time, forwarded positions,
    useful FLOPs and their rate."""

    flops = useful_flops(lm, requests)
    load_before = os.getloadavg()
    cpu = time.process_time()
    with Forwarded(lm.model) as counter:
        start = time.perf_counter()
        lm._loglikelihood_tokens(list(requests), True)
        wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    return {
        "wall_s": round(wall, 1),
        "process_cpu_s": round(cpu, 1),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "forward_calls": counter.calls,
        "forwarded_positions": counter.positions,
        "tree_tokens_per_s": round(flops["tree_tokens"] / wall, 1),
        "useful_gflop_per_s": round(flops["useful_gflop"] / wall, 1),
        **flops,
    }


def peak_seconds(flops: dict[str, Any], peak: dict[str, float], config: Any) -> float:
    """Seconds the useful FLOPs take with every matmul at its measured rate."""
    hidden, inner, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    kv = config.num_key_value_heads * (hidden // config.num_attention_heads)
    rate = {}
    for key, r in peak.items():  # "512x576 @ 576x1536" -> (576, 1536)
        dims = key.replace(" @ ", "x").split("x")
        rate[(int(dims[1]), int(dims[3]))] = r
    layer = {  # (k, n): matrices of that shape per layer
        (hidden, hidden): 2, (hidden, kv): 2, (hidden, inner): 2, (inner, hidden): 1,
    }  # fmt: skip
    per_token = sum(2 * k * n * count / (rate[(k, n)] * 1e9) for (k, n), count in layer.items())
    per_token *= config.num_hidden_layers
    per_head = 2 * hidden * vocab / (rate[(hidden, vocab)] * 1e9)
    return flops["tree_tokens"] * per_token + flops["scored_positions"] * per_head


def record_name(task: str, part: tuple[int, int] | None) -> str:
    return f"{task}.part-{part[0]}-of-{part[1]}.json" if part else f"{task}.json"


def run_full(names: Sequence[str], manager: Any, lm: Any, args: argparse.Namespace) -> None:
    """Each task's record in ``args.full`` (those there are kept: the run resumes)."""

    args.full.mkdir(parents=True, exist_ok=True)
    peak = matmul_peak(model_shapes(lm.model.config))
    for name in names:
        path = args.full / record_name(name, args.part)
        if path.exists():
            print(f"{path}: recorded, skipped", flush=True)
            continue
        row = {"machine": machine(), "model": args.model, "model_load_s": args.load_s,
               "batch_size": args.batch_size, "workers": lm._workers,
               "prefix_kernels": "onednn" if lm._packed else "torch",
               "part": list(args.part) if args.part else None}  # fmt: skip
        row.update(run_task(name, manager, lm, args))
        full = row["full_split"]
        full["matmul_gflops"] = peak
        full["seconds_at_peak"] = round(peak_seconds(full, peak, lm.model.config), 1)
        full["efficiency"] = round(full["seconds_at_peak"] / full["wall_s"], 3)
        row["machine"]["load_average_at_end"] = os.getloadavg()
        path.write_text(json.dumps(row, indent=1) + "\n")
        print(f"{path}: {full['wall_s']} s, {full['tree_tokens_per_s']} tokens/s, "
              f"efficiency {full['efficiency']:.0%}", flush=True)  # fmt: skip


def part_option(value: str) -> tuple[int, int]:
    """``--part K/N`` (an argparse type): the K-th of N runs, 1 <= K <= N."""
    k, slash, n = value.partition("/")
    if not (slash and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{value!r}: K/N with 1 <= K <= N, e.g. 1/4")
    return int(k), int(n)


def main() -> None:
    parser = Parser(__doc__)
    parser.add_argument("--tasks", default=None, help="comma-separated (default: the 16)")
    parser.add_argument("--share", type=float, default=0.02, help="sample share of documents")
    parser.add_argument("--min-docs", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=8, help="runs of consecutive documents")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--no-time", action="store_true", help="count tokens only")
    parser.add_argument("--label", default=None, help="output name suffix (default: date)")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    parser.add_argument("--full", type=Path, default=None, help="time full splits: records")
    parser.add_argument("--part", type=part_option, default=None,
                        help="K/N: the K-th of N runs of documents")  # fmt: skip
    parser.add_argument("--summary", type=Path, default=None, help="join the records of DIR")
    parser.add_argument("--model-args", default="", help="extra hf-prefix model arguments")
    args = parser.parse_args()
    if args.summary and not args.summary.is_dir():
        parser.error(f"--summary {args.summary}: no such folder; give the --full folder")
    if args.summary:
        joined = summary(args.summary)
        (args.summary / "suite.json").write_text(json.dumps(joined, indent=1) + "\n")
        (args.summary / "suite.md").write_text(summary_markdown(joined))
        print(summary_markdown(joined))
        return

    from lm_eval_dcpmi import _paper as paper

    started = time.perf_counter()
    lm, manager, model_args = load_model(args.batch_size, args.threads, args.model_args)
    args.load_s = round(time.perf_counter() - started, 1)
    args.model = model_args["gguf_file"]
    if args.full:
        names = args.tasks.split(",") if args.tasks else paper.paper_order()
        return run_full(names, manager, lm, args)
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
    run_main(main)
