"""Every document's DC-PMI metrics under two (or more) lm-eval releases, compared.

    DCPMI_DATA_DIR=../shared/data .venv/bin/python scripts/compare_releases.py \\
        --python .venv-lowest/bin/python \\
        --python .venv-lm-eval-0.5.0.dev1/bin/python \\
        --model hf --model hf-prefix --limit 20 --output_path out/releases

For each interpreter (each with its own lm-eval) and each model backend, runs lm-eval's
own command line (``python -m lm_eval``) on the embedded model with ``--log_samples``,
this checkout's plugin first on the path (``PYTHONPATH``), then compares the logged
samples of every document with the first interpreter's: the requests (context and
continuation, byte for byte), the loglikelihoods, and every per-document metric the sample
names (``metrics``: lm-eval's own and the plugin's accuracies and counts).
``--via dcpmi`` runs the plugin's ``dcpmi run`` instead of ``lm_eval``.
Prints one line per task and model, and exits 1 on any difference. A run whose samples
are already under ``--output_path`` is not repeated (delete its folder to rerun it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lm_eval_dcpmi._harness._logged import logged_loglikelihood  # noqa: E402
from lm_eval_dcpmi.report._samples import read_samples  # noqa: E402

DEFAULT_TASKS = "dcpmi_copa,dcpmi_race_m,dcpmi_sst2"
# Loglikelihoods may differ in the last bits when lm-eval batches the requests otherwise.
LL_TOLERANCE = 1e-4


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def ask(python: str, code: str) -> str:
    completed = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    )
    return completed.stdout.strip().splitlines()[-1]


def lm_eval_version(python: str) -> str:
    return ask(python, "import importlib.metadata as m; print(m.version('lm-eval'))")


def run(python: str, model: str, tasks: str, limit: int, output: Path, via: str) -> Path:
    """``python -m lm_eval`` (or the plugin's ``dcpmi run``, ``via``) once; the folder
    holding its results and samples."""
    if not list(output.rglob("samples_*.jsonl")):
        model_args = ask(
            python, "from lm_eval_dcpmi import embedded; print(embedded.model_args_string())"
        )
        start = [python, "-m", "lm_eval"]
        if via == "dcpmi":
            start = [python, "-m", "lm_eval_dcpmi.cli", "run"]
        command = [
            *start,
            "--model", model, "--model_args", model_args,
            "--device", "cpu", "--batch_size", "8",
            "--tasks", tasks, "--limit", str(limit),
            "--log_samples", "--output_path", str(output),
        ]  # fmt: skip
        print("running:", " ".join(command), flush=True)
        log = output.parent / f"{output.name}.log"
        output.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as file:
            subprocess.run(
                command, stdout=file, stderr=subprocess.STDOUT, env=child_env(), check=True
            )
    return output


def samples_by_task(output: Path) -> dict[str, dict[int, dict[str, Any]]]:
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(output.rglob("samples_*.jsonl")):
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        found[task] = {int(sample["doc_id"]): sample for sample in read_samples(path)}
    return found


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def same_value(a: Any, b: Any) -> bool:
    """Two logged metric values alike: numbers (JSONL holds them as strings), or lists of
    them (``acc_bc``'s per-document item)."""
    if isinstance(a, list) or isinstance(b, list):
        a, b = list(a or []), list(b or [])
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return False
    return same(float(a), float(b))


def compare_documents(
    task: str, first: dict[int, dict[str, Any]], other: dict[int, dict[str, Any]]
) -> tuple[int, list[str], float]:
    """Documents compared, the differences found (one line each), the largest difference
    of a loglikelihood."""
    differences = []
    largest = 0.0
    if sorted(first) != sorted(other):
        differences.append(f"{task}: documents {sorted(first)} != {sorted(other)}")
    for doc_id in sorted(set(first) & set(other)):
        a, b = first[doc_id], other[doc_id]
        where = f"{task} doc {doc_id}"
        if a["arguments"] != b["arguments"]:
            differences.append(f"{where}: the requests differ")
            continue
        for response_a, response_b in zip(a["filtered_resps"], b["filtered_resps"], strict=True):
            ll_a = float(logged_loglikelihood(response_a))
            ll_b = float(logged_loglikelihood(response_b))
            if not same(ll_a, ll_b):
                largest = max(largest, abs(ll_a - ll_b))
        if sorted(a["metrics"]) != sorted(b["metrics"]):
            differences.append(f"{where}: metrics {a['metrics']} != {b['metrics']}")
        for name in a["metrics"]:
            value_a, value_b = a.get(name), b.get(name)
            if not same_value(value_a, value_b):
                differences.append(f"{where}: {name} {value_a} != {value_b}")
    return len(set(first) & set(other)), differences, largest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", required=True, help="an interpreter")
    parser.add_argument("--model", action="append", help="hf, hf-prefix (default: both)")
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--output_path", type=Path, default=ROOT / "out" / "releases")
    parser.add_argument(
        "--via", choices=("lm_eval", "dcpmi"), default="lm_eval", help="lm_eval, or dcpmi run"
    )
    args = parser.parse_args(argv)
    models = args.model or ["hf", "hf-prefix"]
    versions = [lm_eval_version(python) for python in args.python]
    if len(set(versions)) != len(versions):
        parser.error(f"the interpreters hold the same lm-eval releases: {versions}")
    failed = False
    for model in models:
        runs = [
            samples_by_task(
                run(
                    python,
                    model,
                    args.tasks,
                    args.limit,
                    args.output_path / f"{version}-{model}-{args.via}",
                    args.via,
                )
            )
            for python, version in zip(args.python, versions, strict=True)
        ]
        for version, other in zip(versions[1:], runs[1:], strict=True):
            for task in args.tasks.split(","):
                if task not in runs[0] or task not in other:
                    print(f"{model} {task}: no samples from {versions[0]} or {version}")
                    failed = True
                    continue
                n, differences, largest = compare_documents(task, runs[0][task], other[task])
                print(
                    f"{model} {task}: {versions[0]} vs {version}: {n} documents, "
                    f"{len(differences)} differences, largest loglikelihood difference "
                    f"{largest:.2e}"
                )
                for line in differences:
                    print("   ", line)
                failed |= bool(differences) or largest > LL_TOLERANCE
    print(json.dumps({"lm-eval": versions, "models": models, "same": not failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
