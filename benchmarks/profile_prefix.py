"""Where ``hf-prefix``'s time goes: a torch profile of a sample of a task, against the
machine's measured matmul peak.

For each task (default: HellaSwag and RACE-H, the suite's longest), in one process with
the embedded model loaded once:

1. a sample of documents spread evenly over the split (``common.sample_documents``),
   its requests encoded as lm-eval encodes them, scored once to warm up, once timed and
   once under ``torch.profiler`` (CPU, shapes, FLOPs);
2. the profile's self CPU time per operator, grouped: the LM head's matmuls (the
   ``[positions, 576] @ [576, 49152]`` shape), the other matmuls, attention (SDPA's fused
   CPU kernel, or its math fallback), log-softmax, cache copies (cat, index, copy),
   element-wise work, the rest; and what is not in any operator (Python and dispatch);
3. FLOPs: what the matmuls did (the profiler's count) against the useful ones: each
   prefix-tree token through the layers once, and the LM head at scored positions only.
   Padding (rows of a pass padded to its width) and the LM head at unscored columns are
   the difference;
4. the matmul peak of this machine: ``torch.matmul`` at the model's shapes, in the same
   process and thread setting.

Usage (the data folder as for the tests)::

    DCPMI_DATA_DIR=../shared/data .venv/bin/python benchmarks/profile_prefix.py \\
        --out results/benchmarks --threads 2

writes ``profile_<label>.json`` and prints a summary.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import (
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

GROUPS = {
    "attention (SDPA fused CPU kernel)": ("flash_attention", "_scaled_dot_product_flash"),
    "attention (SDPA math fallback)": ("_scaled_dot_product_attention_math",),
    "log-softmax": ("_log_softmax", "log_softmax"),
    "softmax": ("_softmax",),
    "cache copies (cat, index, copy)": ("aten::cat", "aten::index", "aten::copy_", "gather"),
    "element-wise (norms, activations, rotary)": (
        "aten::mul", "aten::add", "aten::silu", "aten::rsqrt", "aten::pow", "aten::mean",
        "aten::neg", "aten::sub", "aten::div", "aten::cos", "aten::sin", "aten::where",
        "aten::masked_fill", "aten::embedding", "aten::argmax", "aten::eq", "aten::clone",
        "aten::contiguous", "aten::expand", "aten::to", "aten::_to_copy", "aten::fill_",
        "aten::zero_", "aten::empty", "aten::view", "aten::reshape", "aten::transpose",
        "aten::slice", "aten::select", "aten::unsqueeze", "aten::sort",
    ),
}  # fmt: skip
MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")


def group_of(name: str, shapes: Any, vocab: int) -> str:
    if any(name == m for m in MATMULS[:3]):
        if any(vocab in (shape or []) for shape in shapes or []):
            return "matmul: LM head"
        return "matmul: layers"
    if name in MATMULS[3:]:
        return "(wrapper)"
    for group, needles in GROUPS.items():
        if any(needle in name for needle in needles):
            return group
    return "other operators"


def profile_sample(lm: Any, requests: Sequence[Any], vocab: int) -> dict[str, Any]:
    import torch
    from torch._C._profiler import _ExperimentalConfig
    from torch.profiler import ProfilerActivity, profile

    lm._loglikelihood_tokens(list(requests[: max(1, len(requests) // 10)]), True)  # warm up
    start = time.perf_counter()
    lm._loglikelihood_tokens(list(requests), True)
    wall = time.perf_counter() - start
    head_positions = 0

    def count_head(_module: Any, args: tuple) -> None:
        nonlocal head_positions
        head_positions += int(args[0].numel() // args[0].shape[-1])

    handle = lm.model.get_output_embeddings().register_forward_pre_hook(count_head)
    # hf-prefix scores on several Python threads: profile them all
    every_thread = _ExperimentalConfig(profile_all_threads=True)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_flops=True,
        experimental_config=every_thread,
    ) as prof:
        start = time.perf_counter()
        lm._loglikelihood_tokens(list(requests), True)
        profiled_wall = time.perf_counter() - start
    handle.remove()
    groups: dict[str, dict[str, float]] = {}
    total_self = 0.0
    for event in prof.key_averages(group_by_input_shape=True):
        group = group_of(event.key, event.input_shapes, vocab)
        entry = groups.setdefault(group, {"self_s": 0.0, "flops": 0.0, "calls": 0})
        entry["self_s"] += event.self_cpu_time_total / 1e6
        entry["flops"] += float(event.flops or 0)
        entry["calls"] += event.count
        total_self += event.self_cpu_time_total / 1e6
    groups.pop("(wrapper)", None)
    return {
        "wall_s": round(wall, 2),
        "profiled_wall_s": round(profiled_wall, 2),
        # operator time summed over the scoring threads (each op's own time, not its
        # children's); the rest of workers x wall is Python, dispatch and waiting
        "workers": lm._workers,
        "in_operators_thread_s": round(total_self, 2),
        "outside_operators_thread_s": round(max(0.0, lm._workers * profiled_wall - total_self), 2),
        "lm_head_positions": head_positions,
        "groups": {
            k: {
                "self_s": round(v["self_s"], 3),
                "gflop": round(v["flops"] / 1e9, 2),
                "calls": v["calls"],
            }
            for k, v in sorted(groups.items(), key=lambda kv: -kv[1]["self_s"])
        },
        "torch": torch.__version__,
    }


def main() -> None:
    parser = Parser(__doc__)
    parser.add_argument("--tasks", default="dcpmi_hellaswag,dcpmi_race_h")
    parser.add_argument("--documents", type=int, default=48, help="sample size per task")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--label", default=None)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    args = parser.parse_args()

    lm, manager, model_args = load_model(args.batch_size, args.threads)
    config = lm.model.config
    report: dict[str, Any] = {
        "machine": machine(),
        "model": model_args["gguf_file"],
        "batch_size": args.batch_size,
        "attention": getattr(config, "_attn_implementation", None),
        "tasks": {},
    }
    vocab = config.vocab_size
    for name in args.tasks.split(","):
        task = manager.load([name])["tasks"][name]
        task.build_all_requests(limit=None, rank=0, world_size=1)
        instances = sorted(task.instances, key=lambda i: (i.doc_id, i.idx))
        chosen = set(
            sample_documents(sorted({i.doc_id for i in instances}), args.documents, args.blocks)
        )
        sample = [i for i in instances if i.doc_id in chosen]
        requests = encode(lm, sample)
        entry = {"documents": len(chosen), "requests": len(requests)}
        entry.update(useful_flops(lm, requests))
        entry.update(profile_sample(lm, requests, vocab))
        report["tasks"][name] = entry
        print(json.dumps({name: entry}, indent=1), flush=True)
    report["matmul_gflops"] = matmul_peak(model_shapes(config))
    report["machine"]["load_average_at_end"] = os.getloadavg()
    print(json.dumps(report["matmul_gflops"], indent=1))
    label = args.label or datetime.date.today().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"profile_{label}.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    run_main(main)
