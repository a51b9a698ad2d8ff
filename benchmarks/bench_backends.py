"""The backends side by side: ``hf``, ``hf-prefix``, ``vllm`` and ``vllm`` with prefix caching
scoring the same DC-PMI requests on the same cores, one after the other in one run.

The requests are every request (conditional and domain, CC's content-free ones on SST-2)
of the first documents of RACE-H (24: long articles, several questions each), HellaSwag
(40) and SST-2 (100: short sentences). Each backend runs in a process of its own: the
model loaded (timed apart), then each task's requests scored in one ``loglikelihood`` call
(timed). Tokens are the positions ``hf`` forwards (every request's context and
continuation, less the last token): the same work for every backend, so tokens/s compare.
Every backend's loglikelihoods are compared with ``hf``'s (largest |difference|).

Usage, in the environment ``scripts/setup-vllm.sh`` makes (vLLM's CPU build, the embedded
model as an fp32 folder, which every backend loads)::

    DCPMI_DATA_DIR=../shared/data .venv-vllm/bin/python benchmarks/bench_backends.py \\
        --out results/benchmarks

writes ``backends_<date>.json`` and ``backends_<date>.md``; ``--backends`` a
comma-separated subset, ``--model`` another model folder or hub id.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import Parser, machine, run_main

DOCUMENTS = {"dcpmi_race_h": 24, "dcpmi_hellaswag": 40, "dcpmi_sst2": 100}
BACKENDS = ("hf", "hf-prefix", "vllm", "vllm-prefix-caching")
MAX_MODEL_LEN = 2048
# vLLM's CPU build: the cores, its cache (GiB), its engine in this process (docs/harness.md).
VLLM_ENV = {
    "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


def model_args(backend: str, model: str) -> dict:
    if backend.startswith("vllm"):
        # batch_size auto: every request to vLLM in one call, its scheduler batches them
        args = {"pretrained": model, "dtype": "float32", "max_model_len": MAX_MODEL_LEN}
        args.update(enforce_eager=True, batch_size="auto")
        if backend == "vllm-prefix-caching":
            args["enable_prefix_caching"] = True
        return args
    return {"pretrained": model, "dtype": "float32", "batch_size": 8, "device": "cpu"}


def requests(model: str) -> dict[str, list[tuple[str, str]]]:
    """Every request of each task's first documents (DOCUMENTS), in lm-eval's order."""
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    manager = TaskManager(include_path=str(task_configs_dir()), metadata={"pretrained": model})
    loaded = manager.load_task_or_group(list(DOCUMENTS))
    out = {}
    for name, count in DOCUMENTS.items():
        task = loaded[name]
        task.build_all_requests(limit=count, rank=0, world_size=1)
        ordered = sorted(task.instances, key=lambda i: (i.doc_id, i.idx))
        out[name] = [(str(i.arguments[0]), str(i.arguments[1])) for i in ordered]
    return out


def child(backend: str, model: str) -> dict:
    """One backend: load, then score each task's requests; times and loglikelihoods."""
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    pairs = requests(model)
    name = "vllm" if backend.startswith("vllm") else backend
    start = time.perf_counter()
    lm = get_model(name)(**model_args(backend, model))
    load_s = time.perf_counter() - start
    record: dict = {"load_s": round(load_s, 2), "score_s": {}, "loglikelihoods": {}}
    for task, task_pairs in pairs.items():
        instances = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(task_pairs)]
        start = time.perf_counter()
        answers = lm.loglikelihood(instances, disable_tqdm=True)
        record["score_s"][task] = round(time.perf_counter() - start, 2)
        record["loglikelihoods"][task] = [float(a[0]) for a in answers]
    if name == "hf":  # the positions hf forwards: the work every backend does
        record["tokens"] = {
            task: sum(_hf_positions(lm, *pair) for pair in task_pairs)
            for task, task_pairs in pairs.items()
        }
        record["requests"] = {task: len(task_pairs) for task, task_pairs in pairs.items()}
    return record


def _hf_positions(lm, context: str, continuation: str) -> int:
    if not context:
        return len(lm.tok_encode(continuation, add_special_tokens=False))
    context_tokens, continuation_tokens = lm._encode_pair(context, continuation)
    return len(context_tokens) + len(continuation_tokens) - 1


def versions() -> dict[str, str]:
    import importlib.metadata as metadata

    found = {}
    for package in ("torch", "transformers", "lm_eval", "vllm", "lm-eval-dcpmi"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "-"
    return found


def markdown(record: dict) -> str:
    tasks = list(DOCUMENTS)
    head = " | ".join(f"{t.removeprefix('dcpmi_')} {DOCUMENTS[t]} (s)" for t in tasks)
    lines = [
        f"# Backends, {record['date']}: {record['cpu']}, {record['cores']} cores",
        "",
        f"Model: `{record['model']}` (fp32). Versions: "
        + ", ".join(f"{k} {v}" for k, v in record["versions"].items())
        + ". Requests: "
        + ", ".join(f"{t} {record['requests'][t]} ({record['tokens'][t]:,} tokens)" for t in tasks)
        + ". Scoring time per task, the model load apart; tokens/s over all three.",
        "",
        f"| Backend | load (s) | {head} | scoring (s) | tokens/s | vs hf | max abs diff |",
        "|:---|---:|" + "---:|" * len(tasks) + "---:|---:|---:|---:|",
    ]
    hf_total = record["backends"]["hf"]["total_score_s"] if "hf" in record["backends"] else None
    for backend, data in record["backends"].items():
        cells = " | ".join(f"{data['score_s'][t]:.1f}" for t in tasks)
        ratio = f"{hf_total / data['total_score_s']:.2f}x" if hf_total else "-"
        lines.append(
            f"| {backend} | {data['load_s']:.1f} | {cells} | {data['total_score_s']:.1f} | "
            f"{data['tokens_per_s']:,.0f} | {ratio} | {data['max_abs_diff_vs_hf']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = Parser(__doc__)
    default_model = Path(sys.prefix) / "models" / "SmolLM2-135M-Instruct-fp32"
    parser.add_argument("--model", default=str(default_model))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        print("RECORD " + json.dumps(child(args.child, args.model)))
        return
    backends = args.backends.split(",")
    if "hf" not in backends:
        backends.insert(0, "hf")  # the reference: tokens and differences
    results = {}
    for backend in backends:
        print(f"bench_backends: {backend} ...", flush=True)
        completed = subprocess.run(
            [sys.executable, __file__, "--child", backend, "--model", args.model],
            capture_output=True,
            text=True,
            env={**os.environ, **VLLM_ENV},
        )
        lines = [line for line in completed.stdout.splitlines() if line.startswith("RECORD ")]
        if completed.returncode != 0 or not lines:
            sys.exit(f"bench_backends: {backend} failed:\n{completed.stderr[-3000:]}")
        results[backend] = json.loads(lines[-1].removeprefix("RECORD "))
    reference = results["hf"]
    host = machine()
    tokens = sum(reference["tokens"].values())
    record = {
        "date": datetime.date.today().isoformat(),
        "cpu": host["cpu"],
        "isa": host["isa"],
        "commit": host["commit"],
        "cores": os.cpu_count(),
        "model": args.model if not Path(args.model).exists() else Path(args.model).name,
        "versions": versions(),
        "documents": DOCUMENTS,
        "requests": reference["requests"],
        "tokens": reference["tokens"],
        "backends": {},
    }
    for backend, data in results.items():
        total = sum(data["score_s"].values())
        largest = max(
            abs(a - b)
            for task in DOCUMENTS
            for a, b in zip(
                reference["loglikelihoods"][task], data["loglikelihoods"][task], strict=True
            )
        )
        record["backends"][backend] = {
            "load_s": data["load_s"],
            "score_s": data["score_s"],
            "total_score_s": round(total, 2),
            "tokens_per_s": round(tokens / total, 1),
            "max_abs_diff_vs_hf": largest,
        }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"backends_{record['date']}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(record))
    print(markdown(record))
    print(f"wrote {stem}.json and {stem}.md")


if __name__ == "__main__":
    run_main(main)
