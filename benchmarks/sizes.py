"""The parts of ``bench_sizes.py``: the requests, one backend's run (``worker``, in a
process of its own), and the comparisons and page of the record. The models come from
``published_configs``."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from common import matmul_peak
from published_configs import Spec


# ------------------------------------------------------------------ the requests
def sample_requests(args: Any) -> dict[str, Any]:
    """Every request of the first documents of RACE-H and HellaSwag (``--race``,
    ``--hellaswag``), or made-up ones of their shape; with each document's layout."""
    if args.requests == "synthetic":
        return _synthetic(args.race, args.hellaswag)
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import embedded, task_configs_dir

    # The embedded tokenizer (every model here has it) tells the tasks how to count tokens.
    manager = TaskManager(include_path=str(task_configs_dir()), metadata=embedded.model_args())
    counts = {"dcpmi_race_h": args.race, "dcpmi_hellaswag": args.hellaswag}
    loaded = manager.load_task_or_group(list(counts))
    pairs: list[list[str]] = []
    documents = []
    for name, count in counts.items():
        task = loaded[name]
        task.build_all_requests(limit=count, rank=0, world_size=1)
        by_doc: dict[int, list[Any]] = {}
        for instance in sorted(task.instances, key=lambda i: (i.doc_id, i.idx)):
            by_doc.setdefault(instance.doc_id, []).append(instance)
        for doc_id, instances in by_doc.items():
            n, carrier = task.layout.n_options([str(i.arguments[1]) for i in instances])
            documents.append({
                "task": name, "doc_id": doc_id, "first": len(pairs), "count": len(instances),
                "options": n, "carrier": carrier, "references": list(task.layout.references),
                "content_free": list(task.layout.content_free),
                "n_chars": [len(c) for c in task.doc_to_choice(instances[0].doc)],
            })  # fmt: skip
            pairs.extend([str(i.arguments[0]), str(i.arguments[1])] for i in instances)
    return {"source": "data", "counts": counts, "documents": documents, "pairs": pairs}


def _synthetic(race: int, hellaswag: int) -> dict[str, Any]:
    """RACE-H-shaped documents (a ~450-word article, a question, four options and the
    domain premise's four requests) and HellaSwag-shaped ones (a ~50-word context, four
    ~20-word endings), made of a fixed made-up vocabulary: no data needed."""
    rng = random.Random(0)
    words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(2, 8)))
             for _ in range(2000)]  # fmt: skip

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    pairs: list[list[str]] = []
    documents = []
    shapes = [("race_h_shaped", race, 450, 8, " the answer is:"),
              ("hellaswag_shaped", hellaswag, 50, 20, None)]  # fmt: skip
    for task, count, length, option_words, domain in shapes:
        for doc_id in range(count):
            premise = f"{text(length)}\nQuestion: {text(12)}?\nAnswer:"
            options = [" " + text(option_words) for _ in range(4)]
            reference = domain if domain else " " + premise.split()[-2]
            documents.append({
                "task": task, "doc_id": doc_id, "first": len(pairs), "count": 8, "options": 4,
                "carrier": False, "references": ["domain"], "content_free": [],
                "n_chars": [len(option) for option in options],
            })  # fmt: skip
            pairs += [[premise, option] for option in options]
            pairs += [[reference, option] for option in options]
    counts = {"race_h_shaped": race, "hellaswag_shaped": hellaswag}
    return {"source": "synthetic", "counts": counts, "documents": documents, "pairs": pairs}


# ------------------------------------------------------------------ one backend's run
def worker(args: Any) -> dict[str, Any]:
    """Load ``args.worker`` (hf or hf-prefix) on the saved model, score every request in
    one call; times, positions, memory and the loglikelihoods."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM

    requests = json.loads(args.requests_file.read_text())
    pairs = [tuple(pair) for pair in requests["pairs"]]
    memory = _Memory(args.device)
    checked: list[float] = []
    if args.worker == "hf-prefix":  # the self-check's share of the load, timed apart
        decide = PrefixHFLM._decide_setup

        def timed(self: Any) -> Any:
            start = time.perf_counter()
            try:
                return decide(self)
            finally:
                checked.append(time.perf_counter() - start)

        PrefixHFLM._decide_setup = timed
    backend = PrefixHFLM if args.worker == "hf-prefix" else HFLM
    start = time.perf_counter()
    lm = backend(pretrained=str(args.folder), dtype=args.dtype, device=args.device,
                 batch_size=args.batch_size, max_batch_size=args.max_batch_size)  # fmt: skip
    load_s = time.perf_counter() - start
    load_peak = memory.peak_and_reset()
    detected: list[int] = []
    probing = [False, 0.0]  # in batch_size=auto's detection; its seconds
    probe_peaks: list[float] = []
    detect = lm._detect_batch_size

    def recorded(*a: Any, **k: Any) -> int:
        # auto's probe (five passes of max_batch_size rows of the longest request) is no
        # scoring: timed apart, and its passes not counted as forwarded positions.
        probing[0], start = True, time.perf_counter()
        try:
            detected.append(detect(*a, **k))
        finally:
            if memory.cuda:  # its passes are queued: wait for them before the clock stops
                torch.cuda.synchronize()
            probing[0] = False
            probing[1] += time.perf_counter() - start
            probe_peaks.append(memory.peak_and_reset())  # the scoring's peak is its own
        return detected[-1]

    lm._detect_batch_size = recorded
    forwarded = [0, 0]  # positions, calls

    def count(_module: Any, positional: tuple, keywords: dict) -> None:
        if probing[0]:
            return
        ids = keywords.get("input_ids", positional[0] if positional else None)
        forwarded[0] += int(ids.numel())
        forwarded[1] += 1

    hook = lm.model.register_forward_pre_hook(count, with_kwargs=True)
    instances = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    start = time.perf_counter()
    answers = lm.loglikelihood(instances, disable_tqdm=True)
    score_s = time.perf_counter() - start - probing[1]
    hook.remove()
    encoded = [_encode(lm, *pair) for pair in pairs]
    record = {
        "load_s": round(load_s, 2),
        "score_s": round(score_s, 2),
        "forwarded_positions": forwarded[0],
        "forward_calls": forwarded[1],
        "peak_memory_load_gb": load_peak,
        "peak_memory_scoring_gb": memory.peak_and_reset(),
        "memory_kind": memory.kind,
        "hf_positions": sum(len(c) + len(x) - 1 for c, x in encoded),
        "scored_positions": sum(len(x) for _, x in {(tuple(c), tuple(x)) for c, x in encoded}),
        "n_tokens": [len(x) for _, x in encoded],
        "loglikelihoods": [float(value) for value, _ in answers],
        "greedy": [bool(greedy) for _, greedy in answers],
    }
    if checked:
        record["self_check_s"] = round(checked[0], 2)
        setup = lm._setup
        record["setup"] = (
            None
            if setup is None
            else {
                "packed": setup.packed,
                "window_masks": setup.window_masks,
                "window": setup.window,
            }
        )
        if setup is not None:  # the cache budget of the call that scored them all
            rows = int(args.batch_size) if str(args.batch_size).isdigit() else detected[-1]
            unique = list({(tuple(c), tuple(x)) for c, x in encoded})
            element = torch.empty((), dtype=lm.model.dtype).element_size()
            budget = lm._budget(rows, unique, setup)
            record["cache_budget_mb"] = round(budget.cache * element / 2**20, 1)
    if detected:
        record["batch_size_auto"] = detected
        record["batch_size_auto_s"] = round(probing[1], 2)
        record["peak_memory_batch_size_auto_gb"] = max(probe_peaks)
    return record


def _encode(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """The request's tokens as HFLM splits them (an empty context: the prefix token)."""
    if not context:
        return [lm.prefix_token_id], lm.tok_encode(continuation, add_special_tokens=False)
    return lm._encode_pair(context, continuation)


class _Memory:
    """Peak resident memory of this process (VmHWM, reset through clear_refs), or of the
    GPU's allocator on CUDA; in GB."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.kind = "cuda max_memory_allocated" if self.cuda else "resident (VmHWM)"

    def peak_and_reset(self) -> float:
        if self.cuda:
            import torch

            peak = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            return round(peak / 1e9, 2)
        status = Path("/proc/self/status").read_text()
        (line,) = [line for line in status.splitlines() if line.startswith("VmHWM:")]
        peak = int(line.split()[1]) * 1024
        Path("/proc/self/clear_refs").write_text("5")
        return round(peak / 1e9, 2)


# ------------------------------------------------------------------ the record
def compare(requests: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Largest |difference| of a loglikelihood between two runs, and whether every
    document's pick under every per-document method agrees (and greedy flags); a document
    whose picks differ is named with the methods they differ under."""
    from lm_eval_dcpmi.rules._layout import Layout
    from lm_eval_dcpmi.rules._scoring import DocumentScores, predictions

    x, y = a["loglikelihoods"], b["loglikelihoods"]
    largest = max(abs(p - q) for p, q in zip(x, y, strict=True))
    differing = []
    for doc in requests["documents"]:
        layout = Layout(tuple(doc["references"]), tuple(doc["content_free"]))
        span = slice(doc["first"], doc["first"] + doc["count"])
        n = doc["options"]
        tokens = a["n_tokens"][span][:n]
        picks = []
        for values in (x[span], y[span]):
            blocks = layout.blocks(values, n, doc["carrier"])
            scores = DocumentScores(blocks.conditional, blocks.references, tokens, doc["n_chars"])
            picks.append(predictions(scores))
        if picks[0] != picks[1]:  # and under which methods
            methods = [m for m in picks[0] if picks[0][m] != picks[1].get(m)]
            differing.append(f"{doc['task']} {doc['doc_id']}: {', '.join(methods)}")
    return {
        "max_abs_diff": largest,
        "picks_equal": not differing,
        "documents_differing": differing,
        "greedy_equal": a["greedy"] == b["greedy"],
    }


def performed_gflop(spec: Spec, parameters: dict, record: dict, backend: str) -> float:
    """The matmul FLOPs a run performed: every forwarded position through the layers
    (2 per non-embedding parameter); the LM head at every position for ``hf``, at the
    scored ones for ``hf-prefix`` (``logits_to_keep``). Attention's own FLOPs left out."""
    layers = 2 * parameters["non_embedding"] * record["forwarded_positions"]
    head_positions = (
        record["forwarded_positions"] if backend == "hf" else record["scored_positions"]
    )
    return (layers + 2 * parameters["head"] * head_positions) / 1e9


def matmul_rate(spec: Spec, device: str) -> dict[str, Any]:
    """``torch.matmul``'s GFLOP/s at the model's layer shapes in its dtype, and the best."""
    hidden, inner = spec.config["hidden_size"], spec.config["intermediate_size"]
    shapes = [(512, hidden, inner), (512, inner, hidden), (512, hidden, hidden)]
    found = matmul_peak(shapes, dtype=spec.dtype, device=device)
    return {"shapes": found, "best": max(found.values())}


def peak_gb(backend: dict[str, Any]) -> float:
    """A backend's peak memory over its load and its scoring (GB)."""
    return max(backend["peak_memory_load_gb"], backend["peak_memory_scoring_gb"])


def markdown(report: dict[str, Any]) -> str:
    """The record as a page: one row per configuration, by parameter count."""
    host = report["machine"]
    counts = ", ".join(f"{task} {n}" for task, n in report["requests"]["counts"].items())
    rows = sorted(report["configs"], key=lambda row: row["parameters"]["total"])
    lines = [
        f"# hf and hf-prefix at real model sizes, {host['date'][:10]}: {host['cpu']}, "
        f"{host['cpus']} cores",
        "",
        f"Random-weight models from published configurations; requests: the first documents "
        f"of {counts} ({report['requests']['source']}), every request in one call. Versions: "
        + ", ".join(f"{k} {v}" for k, v in host["versions"].items())
        + f"; commit {host['commit']}. Load: the backend's constructor (hf-prefix's with its "
        "self-check); whole run: load + scoring; tokens/s: the positions hf forwards over the "
        "scoring time; efficiency: matmul FLOPs performed over the wall time, against "
        "torch.matmul at the model's shapes and dtype; memory: peak resident (GB).",
        "",
        "| model | parameters | vocab | dtype | batch | load hf / hf-prefix (s) | "
        "start-up ratio | scoring hf / hf-prefix (s) | tokens/s hf / hf-prefix | "
        "speed-up scoring / whole run | efficiency hf / hf-prefix | max abs dll | picks | "
        "peak memory hf / hf-prefix | memory ratio |",
        "|:---|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|:---|---:|---:|",
    ]
    for row in rows:
        hf, prefix = row["backends"]["hf"], row["backends"]["hf-prefix"]
        check = prefix.get("self_check_s")
        hf_peak, prefix_peak = peak_gb(hf), peak_gb(prefix)
        same = row["hf_prefix_vs_hf"]
        window = f", window {row['sliding_window']}" if row.get("sliding_window") else ""
        lines.append(
            f"| {row['config']}{window} | {row['parameters']['total'] / 1e9:.2f}B | "
            f"{row['vocab']:,} | {row['dtype']} | {row['batch_size']} | "
            f"{hf['load_s']:.1f} / {prefix['load_s']:.1f}"
            + (f" ({check:.1f} check)" if check is not None else "")
            + f" | {prefix['load_s'] / hf['load_s']:.2f}x | "
            f"{hf['score_s']:.1f} / {prefix['score_s']:.1f} | "
            f"{hf['tokens_per_s']:,.0f} / {prefix['tokens_per_s']:,.0f} | "
            f"{hf['score_s'] / prefix['score_s']:.1f}x / "
            f"{hf['whole_run_s'] / prefix['whole_run_s']:.1f}x | "
            f"{hf['efficiency']:.0%} / {prefix['efficiency']:.0%} | "
            f"{same['max_abs_diff']:.1e} | {'same' if same['picks_equal'] else 'DIFFERENT'} | "
            f"{hf_peak:.1f} / {prefix_peak:.1f} | {prefix_peak / hf_peak:.2f}x |"
        )
    compared = [row for row in rows if "vs_fp32" in row]
    if compared:
        lines += [
            "",
            "In a 16-bit dtype, against the same weights computed in fp32 by hf:",
            "",
            "| model | dtype | hf-prefix vs hf (same dtype) | hf vs hf fp32 | "
            "hf-prefix vs hf fp32 | picks vs fp32 (hf / hf-prefix) |",
            "|:---|:---|---:|---:|---:|:---|",
        ]
        for row in compared:
            fp32 = row["vs_fp32"]
            lines.append(
                f"| {row['config']} | {row['dtype']} | "
                f"{row['hf_prefix_vs_hf']['max_abs_diff']:.1e} | "
                f"{fp32['hf']['max_abs_diff']:.1e} | {fp32['hf-prefix']['max_abs_diff']:.1e} | "
                + " / ".join(
                    "same"
                    if fp32[b]["picks_equal"]
                    else f"{len(fp32[b]['documents_differing'])} documents differ"
                    for b in ("hf", "hf-prefix")
                )  # fmt: skip
                + " |"
            )
    return "\n".join(lines) + "\n"


def docs_table(report: dict[str, Any]) -> list[str]:
    """docs/performance.md's table of the record, by parameter count (a test compares the
    page with the committed record): the columns a reader picks a backend by."""
    lines = [
        "| model | parameters | vocabulary | dtype | tokens/s `hf` | tokens/s `hf-prefix` | "
        "speed-up, scoring / whole run | start-up `hf-prefix` / `hf` | max \\|dll\\| | picks | "
        "peak memory `hf` / `hf-prefix` (GB) |",
        "|:---|---:|---:|:---|---:|---:|---:|---:|---:|:---|---:|",
    ]
    for row in sorted(report["configs"], key=lambda row: row["parameters"]["total"]):
        hf, prefix = row["backends"]["hf"], row["backends"]["hf-prefix"]
        peaks = [peak_gb(hf), peak_gb(prefix)]
        same = row["hf_prefix_vs_hf"]
        window = " (sliding windows)" if row.get("sliding_window") else ""
        lines.append(
            f"| {row['config']}{window} | {row['parameters']['total'] / 1e9:.2f}B | "
            f"{row['vocab']:,} | {row['dtype']} | {hf['tokens_per_s']:,.0f} | "
            f"{prefix['tokens_per_s']:,.0f} | {hf['score_s'] / prefix['score_s']:.1f}x / "
            f"{hf['whole_run_s'] / prefix['whole_run_s']:.1f}x | "
            f"{prefix['load_s'] / hf['load_s']:.2f}x | {same['max_abs_diff']:.1e} | "
            f"{'same' if same['picks_equal'] else 'DIFFERENT'} | "
            f"{peaks[0]:.1f} / {peaks[1]:.1f} |"
        )
    return lines
