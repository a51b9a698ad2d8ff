"""DC-PMI through vLLM: lm-eval's ``vllm`` backend, and its ``local-completions`` client
against a real ``vllm serve``, score as ``hf`` does.

Runs in the environment ``scripts/setup-vllm.sh`` makes (vLLM's CPU build, the embedded
model as an fp32 folder); ``scripts/test.sh`` runs these tests there (``-m vllm``), and
elsewhere this module is skipped. COPA, SST-2 (with CC's content-free requests and BC) and
RACE-H, the first ``LIMIT`` documents, through ``dcpmi run`` each: every request's
loglikelihood within ``RELATIVE_TOLERANCE`` of ``hf``'s, every per-document metric equal.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (scripts/setup-vllm.sh)")
from helpers import DCPMI  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.usefixtures("data_dir")]

MODEL = Path(
    os.environ.get("DCPMI_VLLM_MODEL", Path(sys.prefix) / "models" / "SmolLM2-135M-Instruct-fp32")
)
# What vLLM's CPU build needs: the cores its threads bind to (all of them; "all" fails), its
# key/value cache in GiB, and its engine in the run's own process: with an engine process
# of its own, 1 run in 2 here ended in "terminate called without an active exception"
# (exit status 134) after writing its results, as vLLM shut the engine down.
VLLM_ENV = {
    "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
}
TASKS = ("dcpmi_copa", "dcpmi_sst2", "dcpmi_race_h")
LIMIT = 4
MAX_MODEL_LEN = 2048  # RACE-H's longest request of these documents is under 1,000 tokens
# vLLM's CPU kernels against transformers', fp32. The difference grows with the loglikelihood
# (a sum over tokens, each off by a few float32 ulps): 6.1e-5 at most on these documents with
# the transformers of 2026-12-04; with transformers 5.19, 1.1e-4 on a RACE-H option of -49.6,
# and 3.3e-6 of |loglikelihood| at most (2026-12-07). A relative bound with room to spare, yet
# a thousand times under what one token scored differently would move.
RELATIVE_TOLERANCE = 1e-5
ABSOLUTE_TOLERANCE = 1e-5  # for loglikelihoods near 0
SERVER_START_S = 300  # vllm serve is up in ~40 s on 2 cores; then the test gives up
PER_DOCUMENT = ("acc", "acc_avg", "acc_norm", "acc_unc", "acc_dcpmi", "truncated", "unranked")


def run(tmp_path_factory, name: str, model: str, model_args: str) -> tuple[dict, dict]:
    """``dcpmi run`` of ``TASKS`` with ``model``: (results, {task: {doc_id: sample}})."""
    out = tmp_path_factory.mktemp(name)
    completed = subprocess.run(
        [
            DCPMI,
            "run",
            "--model",
            model,
            "--model_args",
            model_args,
            "--tasks",
            ",".join(TASKS),
            "--limit",
            str(LIMIT),
            "--log_samples",
            "--output_path",
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**os.environ, **VLLM_ENV},
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    (results_file,) = out.rglob("results_*.json")
    samples = {}
    for task in TASKS:
        (path,) = out.rglob(f"samples_{task}_*.jsonl")
        lines = path.read_text(encoding="utf-8").splitlines()
        samples[task] = {s["doc_id"]: s for s in map(json.loads, lines)}
    return json.loads(results_file.read_text()), samples


def assert_same_scores(reference: tuple[dict, dict], other: tuple[dict, dict], what: str) -> None:
    """Every request within the tolerances, every per-document metric and accuracy equal."""
    (want_results, want), (got_results, got) = reference, other
    largest = 0.0
    for task in TASKS:
        assert sorted(got[task]) == sorted(want[task]) == list(range(LIMIT)), task
        for doc_id, sample in want[task].items():
            mine = got[task][doc_id]
            assert mine["arguments"] == sample["arguments"], (task, doc_id)
            for i, (want_resp, got_resp) in enumerate(
                zip(sample["resps"], mine["resps"], strict=True)
            ):
                a, b = float(want_resp[0][0]), float(got_resp[0][0])
                largest = max(largest, abs(a - b) / max(abs(a), 1.0))
                assert math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE), (
                    f"{what} {task} doc {doc_id} request {i}: {a} against {b}"
                )
            for metric in PER_DOCUMENT + (("acc_cc",) if "acc_cc" in sample else ()):
                assert mine[metric] == sample[metric], (what, task, doc_id, metric)
        for key, value in want_results["results"][task].items():
            if key.startswith("acc") and "stderr" not in key:
                assert got_results["results"][task][key] == value, (what, task, key)
    print(f"{what}: largest |difference| / max(|loglikelihood|, 1) {largest:.2e}")


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    assert (MODEL / "model.safetensors").is_file(), f"{MODEL}: run scripts/setup-vllm.sh"
    return run(tmp_path_factory, "hf", "hf", f"pretrained={MODEL},dtype=float32")


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory, hf_run):
    args = f"pretrained={MODEL},dtype=float32,max_model_len={MAX_MODEL_LEN},enforce_eager=True"
    return run(tmp_path_factory, "vllm", "vllm", args)


def test_vllm_scores_as_hf(hf_run, vllm_run):
    assert_same_scores(hf_run, vllm_run, "vllm against hf")
    # SST-2's first document carries CC's content-free requests; BC is over all four.
    assert "acc_cc" in vllm_run[1]["dcpmi_sst2"][0]
    assert "acc_bc,none" in vllm_run[0]["results"]["dcpmi_sst2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, vllm_run):
    """``vllm serve`` of the model on 127.0.0.1, up within SERVER_START_S, stopped after
    (its process group: the API server and its engine process)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "vllm-serve.log"
    command = [
        str(Path(sys.executable).with_name("vllm")), "serve", str(MODEL),
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager",
    ]  # fmt: skip
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **VLLM_ENV},
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert process.poll() is None, f"vllm serve ended: {log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, f"vllm serve not up: {log.read_text()[-3000:]}"
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1/completions"
    finally:
        for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def test_local_completions_against_vllm_serve_scores_as_offline_vllm(
    tmp_path_factory, hf_run, vllm_run, server
):
    args = (
        f"model={MODEL},base_url={server},tokenized_requests=False,tokenizer={MODEL},"
        "num_concurrent=1,max_retries=2"
    )
    served = run(tmp_path_factory, "served", "local-completions", args)
    assert_same_scores(vllm_run, served, "local-completions against vllm")
    assert_same_scores(hf_run, served, "local-completions against hf")
