"""What the benchmarks share: the machine they run on, the embedded model as ``hf-prefix``,
lm-eval's encoding of requests, document samples and the model's matmul shapes, peak and
useful FLOPs; and the one rule of their errors (``Parser``, ``Refused``, ``run_main``): a
message of one line naming the option or file at fault and how to put it right, exit
status 2, no traceback. Imported by the benchmark scripts beside it (their folder is on
``sys.path`` when they run as scripts; tests/test_bench_suite.py puts it there)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

# hf-prefix against hf: each request's loglikelihood within this (benchmark records say).
TOLERANCE = 1e-4

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

Encoded = tuple[Any, list[int], list[int]]


# ------------------------------------------------------------------ one-line errors
class Refused(Exception):
    """What a benchmark cannot run with, said in one line: the option or file at fault and
    how to put it right. ``run_main`` ends the run with it (``fail``), no traceback."""


def fail(message: str) -> NoReturn:
    """``<script>: error: <message>``, one line on stderr, and exit status 2 (argparse's
    for a usage error)."""
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{Path(sys.argv[0]).name}: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (``fail``), the option at fault
    named; ``--help`` gives the usage."""

    def __init__(self, doc: str | None, **kwargs: Any) -> None:
        super().__init__(description=(doc or "").split("\n\n")[0], **kwargs)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see --help)")


def run_main(main: Callable[[], object]) -> None:
    """Run a benchmark's ``main``: a ``Refused`` raised anywhere in it ends the run in one
    line (``fail``), not a traceback."""
    try:
        main()
    except Refused as refused:
        fail(str(refused))


def device_option(value: str) -> str:
    """``--device`` (an argparse type, so checked before anything loads): ``cpu``, or
    ``cuda``/``cuda:N`` where torch sees that GPU."""
    if value == "cpu":
        return value
    found = re.fullmatch(r"cuda(?::(\d+))?", value)
    if not found:
        raise argparse.ArgumentTypeError(f"{value!r}: cpu, cuda or cuda:N")
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        raise argparse.ArgumentTypeError(
            f"{value}: torch sees no CUDA device on this machine; run on a GPU machine, "
            "or pass --device cpu"
        )
    if found[1] is not None and int(found[1]) >= count:
        raise argparse.ArgumentTypeError(
            f"{value}: torch sees {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        )
    return value


def count_option(value: str) -> int:
    """A number of documents (an argparse type): a whole number, 0 or more."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: a whole number, 0 or more")
    return number


def read_record(path: Path, fix: str) -> Any:
    """A benchmark's JSON record; one that is not valid JSON (a run cut while writing
    it, an edit) is ``Refused`` in one line naming it, with ``fix``."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        where = (
            f"{error.msg}: line {error.lineno}, column {error.colno}"
            if isinstance(error, json.JSONDecodeError)
            else "not UTF-8 text"
        )
        raise Refused(f"{path}: not valid JSON ({where}): {fix}") from None


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


def model_shapes(config: Any) -> list[tuple[int, int, int]]:
    hidden, inner, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    kv = config.num_key_value_heads * (hidden // config.num_attention_heads)
    return [(512, hidden, inner), (512, inner, hidden), (512, hidden, hidden), (512, hidden, kv),
            (256, hidden, vocab)]  # fmt: skip


def matmul_peak(
    shapes: Sequence[tuple[int, int, int]],
    seconds: float = 1.0,
    dtype: str = "float32",
    device: str = "cpu",
) -> dict[str, float]:
    """GFLOP/s of ``torch.matmul`` in ``dtype`` at each (m, k, n), over about ``seconds``:
    on the CPU the better of one matmul on all of torch's threads and one single-threaded
    matmul per thread at once (how ``hf-prefix``'s workers run), so the peak is not
    understated."""
    import threading

    import torch

    if device != "cpu":
        return _device_matmul_peak(shapes, seconds, getattr(torch, dtype), device)
    threads = torch.get_num_threads()

    def loop(a: Any, b: Any, counts: list[int], stop: float) -> None:
        while time.perf_counter() < stop:
            torch.matmul(a, b)
            counts.append(1)

    found = {}
    for m, k, n in shapes:
        a, b = (
            torch.randn(m, k, dtype=getattr(torch, dtype)),
            torch.randn(k, n, dtype=getattr(torch, dtype)),
        )
        rates = []
        for workers in sorted({1, threads}):
            torch.set_num_threads(threads // workers)
            torch.matmul(a, b)
            counts: list[int] = []
            start = time.perf_counter()
            pool = [
                threading.Thread(target=loop, args=(a, b, counts, start + seconds))
                for _ in range(workers)
            ]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            rates.append(2 * m * k * n * len(counts) / (time.perf_counter() - start) / 1e9)
        torch.set_num_threads(threads)
        found[f"{m}x{k} @ {k}x{n}"] = round(max(rates), 1)
    return found


def _device_matmul_peak(
    shapes: Sequence[tuple[int, int, int]], seconds: float, dtype: Any, device: str
) -> dict[str, float]:
    """GFLOP/s of ``torch.matmul`` on an accelerator (synchronised timing)."""
    import torch

    found = {}
    for m, k, n in shapes:
        a = torch.randn(m, k, dtype=dtype, device=device)
        b = torch.randn(k, n, dtype=dtype, device=device)
        torch.matmul(a, b)
        torch.cuda.synchronize()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(20):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            count += 20
        found[f"{m}x{k} @ {k}x{n}"] = round(
            2 * m * k * n * count / (time.perf_counter() - start) / 1e9, 1
        )
    return found


def useful_flops(lm: Any, requests: Sequence[Any]) -> dict[str, float]:
    """What the sample needs: every prefix-tree token once through the layers (2 FLOPs a
    non-embedding parameter), the LM head at each scored position (2 x hidden x vocab)."""
    from lm_eval_dcpmi.hf_prefix._schedule import Pass, plan, unique_pairs
    from lm_eval_dcpmi.hf_prefix._tree import build_tree, tree_tokens

    pairs = list(unique_pairs(requests))
    tree = build_tree(pairs)
    tokens = tree_tokens(tree)
    padded = sum(
        len(step.rows) * step.width
        for step in plan(tree, lm._budget(int(lm.batch_size), pairs, lm._setup))
        if isinstance(step, Pass)
    )
    config = lm.model.config
    head = 2 * config.hidden_size * config.vocab_size
    layers = 2 * sum(
        p.numel()
        for name, p in lm.model.named_parameters()
        if "embed" not in name and "lm_head" not in name
    )
    scored = sum(len(continuation) for _, continuation in pairs)
    return {
        "tree_tokens": tokens,
        "padded_positions": padded,
        "scored_positions": scored,
        "layer_gflop_per_token": round(layers / 1e9, 4),
        "head_gflop_per_position": round(head / 1e9, 4),
        "useful_gflop": round((tokens * layers + scored * head) / 1e9, 2),
        "padding_gflop": round((padded - tokens) * layers / 1e9, 2),
    }


def machine() -> dict[str, Any]:
    import re

    import torch

    cpu, isa = "unknown", []
    if Path("/proc/cpuinfo").exists():
        cpuinfo = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        cpu = found.group(1).strip() if found else cpu
        # Virtual CPUs often hide their model ("Intel(R) Xeon(R) Processor"): the vector
        # extensions tell an AMD EPYC from a Xeon with AMX.
        found = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.M)
        flags = set(found.group(1).split()) if found else set()
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    commit, commit_from = checkout_commit()
    return {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "commit": commit,
        "commit_from": commit_from,
        "cpu": cpu,
        "isa": isa,
        "cpus": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": os.getloadavg(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in ("torch", "transformers", "lm_eval", "lm-eval-dcpmi")},
        **_gpu(),
    }


# Written by benchmarks/device_prepare.sh, where git is: a GPU machine gets the tree without
# .git and perhaps without a git binary, and its record must still name the code it ran.
COMMIT_FILE = Path(__file__).resolve().parent / "device" / "COMMIT"


def checkout_commit() -> tuple[str, str]:
    """The checkout's short commit, ``+changes`` where tracked files differ from it, and
    where that came from: git, or else ``COMMIT_FILE`` (a tree with no git), or unknown."""
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  check=False)  # fmt: skip
        except OSError:  # no git binary
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return commit + ("+changes" if dirty else ""), "git"
    if COMMIT_FILE.is_file():
        written = COMMIT_FILE.read_text(encoding="utf-8").strip()
        if re.fullmatch(r"[0-9a-f]{7,40}(\+changes)?", written):
            return written, "benchmarks/device/COMMIT"
    return "unknown", "none (no git answered, no benchmarks/device/COMMIT)"


def _gpu() -> dict[str, Any]:
    """The GPU's name and memory where torch sees one (a GPU record names its card)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    properties = torch.cuda.get_device_properties(0)
    return {"gpu": properties.name, "gpu_memory_gb": round(properties.total_memory / 2**30, 1)}


def release_device_memory(device: str) -> dict[str, float]:
    """Hand the GPU memory this process no longer uses back to the driver (the caching
    allocator keeps what a freed model held, ~16 GB after an 8B model is built), so that a
    backend's process started next finds the card free: ``--batch_size auto`` sizes its
    batches by the free memory. What this process still holds after, in GB."""
    if not device.startswith("cuda"):
        return {}
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()
    return {
        "allocated_gb": round(torch.cuda.memory_allocated() / 1e9, 2),
        "reserved_gb": round(torch.cuda.memory_reserved() / 1e9, 2),
    }


def _version(package: str) -> str:
    """A package's version; "checkout" for one imported from the tree, not installed
    (the plugin on a GPU machine, benchmarks/device_check.sh)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "checkout"


def load_model(
    batch_size: int, threads: int | None, extra: str = ""
) -> tuple[Any, Any, dict[str, Any]]:
    """The embedded model as ``hf-prefix`` on the CPU (``threads`` torch threads), a
    TaskManager that knows the plugin's tasks, and the model arguments."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import embedded, task_configs_dir
    from lm_eval_dcpmi._harness import parse_model_args
    from lm_eval_dcpmi.hf_prefix import PrefixHFLM

    model_args = embedded.model_args()
    extra_args = parse_model_args(extra, option="--model_args")  # k=v,k=v, as lm-eval reads it
    lm = PrefixHFLM(**model_args, **extra_args, device="cpu", batch_size=batch_size)
    manager = TaskManager(include_path=str(task_configs_dir()), metadata=model_args)
    return lm, manager, model_args
