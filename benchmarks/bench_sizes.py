"""``hf`` and ``hf-prefix`` at the sizes people run: random-weight models built from the
published configurations of real models (``published_configs.CONFIGS``), with no download.

For each configuration the model is built with random weights at a trained model's scale
(transformers' own initialisation: normal, std 0.02), saved with the embedded model's
tokenizer (whose ids fit every vocabulary here), and scored by ``hf`` and by ``hf-prefix``,
each in a process of its own, so that each load and each peak of resident memory is its
own. Both score the same requests: every request of a RACE-H sample (long articles, each
shared by its question's four options) and of a HellaSwag sample, in one ``loglikelihood``
call, at one batch size (default 4). A configuration in bf16 is also compared with its
fp32 answers where both fit in memory (``published_configs``: ``compare_fp32``).

Recorded per configuration and backend: the load (for ``hf-prefix`` with its self-check),
the scoring and the whole run's wall time; tokens/s (the positions ``hf`` forwards, the
same work for both, over the scoring time); the positions each forwarded; efficiency (the
matmul FLOPs it performed over the wall time, against ``torch.matmul``'s rate at the
model's shapes and dtype measured on the machine in the same run); the peak resident
memory while loading and while scoring; and between the backends the largest |difference|
of a loglikelihood and whether every document's pick under every method agrees.

Usage (the data folder as for the tests; the machine to itself, it takes about an hour)::

    DCPMI_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_sizes.py \\
        --out results/benchmarks --threads 2

writes ``sizes_<label>.json`` and ``sizes_<label>.md``, one configuration at a time (a
configuration already in the JSON is kept: a stopped run resumes). ``--configs`` a
comma-separated subset; ``--work`` where the models are saved (default a temporary
folder; each is deleted after its runs); ``--device cuda`` and ``--requests synthetic``
(RACE- and HellaSwag-shaped made-up text, for a machine without the data) are what
``benchmarks/device_check.sh`` uses on a GPU. A wrong option (a tokenizer folder not there,
``--device cuda`` where torch sees no GPU, no documents) or a record that is not JSON is
refused in one line naming it, exit status 2, before anything loads (``common.Parser``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    Parser,
    Refused,
    count_option,
    device_option,
    machine,
    read_record,
    release_device_memory,
    run_main,
)
from published_configs import CONFIGS, build_model, tokenizer_option
from sizes import (
    compare,
    markdown,
    matmul_rate,
    performed_gflop,
    sample_requests,
    worker,
)

BACKENDS = ("hf", "hf-prefix")


def run_worker(args: argparse.Namespace, folder: Path, backend: str, dtype: str) -> dict:
    """One backend in a process of its own; its record."""
    command = [
        sys.executable, __file__, "--worker", backend, "--folder", str(folder),
        "--dtype", dtype, "--device", args.device, "--batch-size", str(args.batch_size),
        "--requests-file", str(args.requests_file), "--max-batch-size", str(args.max_batch_size),
    ]  # fmt: skip
    if args.threads:
        command += ["--threads", str(args.threads)]
    # What this process built or measured on the GPU goes back to the driver first: the
    # backend's process finds the card as free as it can be (its auto batch size reads it).
    held = release_device_memory(args.device)
    print(f"bench_sizes: {folder.name} {backend} {dtype} ...", flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RECORD ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"bench_sizes: {folder.name} {backend} {dtype} failed:\n{done.stderr[-4000:]}")
    record = json.loads(lines[-1].removeprefix("RECORD "))
    record["process_s"] = round(time.perf_counter() - started, 1)
    if held:
        record["parent_gpu_memory_gb"] = held
    return record


def run_config(name: str, args: argparse.Namespace, requests: dict) -> dict:
    spec = CONFIGS[name]
    folder = args.work / name
    started = time.perf_counter()
    parameters = build_model(spec, folder, args.tokenizer, args.device)
    built_s = round(time.perf_counter() - started, 1)
    runs: dict[str, dict[str, Any]] = {}
    dtypes = [spec.dtype] + (["float32"] if spec.compare_fp32 else [])
    try:
        for dtype in dtypes:
            for backend in BACKENDS if dtype == spec.dtype else ("hf",):
                runs[f"{backend} {dtype}"] = run_worker(args, folder, backend, dtype)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    hf, prefix = runs[f"hf {spec.dtype}"], runs[f"hf-prefix {spec.dtype}"]
    rate = matmul_rate(spec, args.device)
    row: dict[str, Any] = {
        "config": name,
        "source": spec.source,
        "model_type": spec.model_type,
        "parameters": parameters,
        "vocab": spec.config["vocab_size"],
        "sliding_window": spec.config.get("sliding_window"),
        "dtype": spec.dtype,
        "device": args.device,
        "batch_size": args.batch_size,
        "build_and_save_s": built_s,
        "matmul_gflops": rate,
        "tokens": hf["hf_positions"],
        "backends": {},
    }
    for backend, record in (("hf", hf), ("hf-prefix", prefix)):
        gflop = performed_gflop(spec, parameters, record, backend)
        row["backends"][backend] = {
            **{k: v for k, v in record.items() if k not in ("loglikelihoods", "n_tokens")},
            "whole_run_s": round(
                record["load_s"] + record.get("batch_size_auto_s", 0) + record["score_s"], 1
            ),
            "tokens_per_s": round(hf["hf_positions"] / record["score_s"], 1),
            "performed_gflop": round(gflop, 1),
            "efficiency": round(gflop / record["score_s"] / rate["best"], 3),
        }
    row["hf_prefix_vs_hf"] = compare(requests, hf, prefix)
    if spec.compare_fp32:
        fp32 = runs["hf float32"]
        row["vs_fp32"] = {
            "hf": compare(requests, fp32, hf),
            "hf-prefix": compare(requests, fp32, prefix),
        }
    return row


def main() -> None:
    parser = Parser(__doc__)
    parser.add_argument("--configs", default=",".join(c for c in CONFIGS if c != "tiny-llama"))
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    parser.add_argument("--label", default=None, help="output name suffix (default: date)")
    parser.add_argument("--work", type=Path, default=None, help="where models are saved")
    parser.add_argument("--keep", action="store_true", help="keep the saved models")
    parser.add_argument("--batch-size", default="4", help="a number, or auto")
    parser.add_argument("--max-batch-size", type=int, default=64,
                        help="auto's largest try (HFLM's max_batch_size)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--device", type=device_option, default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--requests", default="data", choices=("data", "synthetic"))
    parser.add_argument("--race", type=count_option, default=3, help="RACE-H documents")
    parser.add_argument("--hellaswag", type=count_option, default=4, help="HellaSwag documents")
    parser.add_argument("--tokenizer", type=tokenizer_option, default=None,
                        help="a tokenizer folder (default: embedded)")  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    parser.add_argument("--requests-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RECORD " + json.dumps(worker(args)), flush=True)
        return
    names = args.configs.split(",")
    unknown = [name for name in names if name not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    if args.race + args.hellaswag == 0:
        parser.error("--race 0 --hellaswag 0: no documents to score; give one of them 1 or more")
    label = args.label or datetime.date.today().isoformat()
    path = args.out / f"sizes_{label}.json"
    report = read_sizes(path) if path.exists() else {"machine": machine(), "configs": []}
    args.out.mkdir(parents=True, exist_ok=True)
    done = {row["config"] for row in report["configs"]}
    temporary = None
    if args.work is None:
        temporary = tempfile.TemporaryDirectory(prefix="bench_sizes_")
        args.work = Path(temporary.name)
    args.work.mkdir(parents=True, exist_ok=True)
    requests = sample_requests(args)
    args.requests_file = args.work / "requests.json"
    args.requests_file.write_text(json.dumps(requests))
    report["requests"] = {k: v for k, v in requests.items() if k != "pairs"}
    for name in names:
        if name in done:
            print(f"bench_sizes: {name} recorded, skipped", flush=True)
            continue
        row = run_config(name, args, requests)
        row["load_average_at_end"] = os.getloadavg()
        report["configs"].append(row)
        path.write_text(json.dumps(report, indent=1) + "\n")
        path.with_suffix(".md").write_text(markdown(report))
        print(json.dumps({k: row[k] for k in ("config", "hf_prefix_vs_hf")}), flush=True)
    print(markdown(report))
    if temporary is not None:
        temporary.cleanup()


def read_sizes(path: Path) -> dict[str, Any]:
    """The record a run resumes (``--label``'s); refused in one line where it is not one."""
    fix = "move it aside (this run then starts it afresh), or pass another --label"
    report = read_record(path, fix)
    if not isinstance(report, dict) or not isinstance(report.get("configs"), list):
        raise Refused(f"{path}: not a bench_sizes record (no list of configs): {fix}")
    return report


if __name__ == "__main__":
    run_main(main)
