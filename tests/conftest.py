"""Shared fixtures: the real data in ../shared/data and one loaded embedded model.

Importing this module changes nothing: the environment the tests run in is set in
``pytest_configure`` (and undone when pytest ends). Without the evaluation data the tests
that need it (those using the ``data_dir`` fixture, directly or through ``task_manager`` or
``lm_eval_run``) are skipped with one reason, and the rest run. With
``DCPMI_REQUIRE_DATA=1`` (scripts/test.sh sets it) pytest stops at once with that reason
instead, so the full test command cannot pass by skipping.

The fast tier, ``pytest -m fast``, is the tests marked ``fast``: they need neither the data
nor the model (no ``NOT_FAST`` fixture, checked at collection). The helpers the test files
share are in helpers.py and report_helpers.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from helpers import (
    E2E_TASKS,
    MISSING_DATA,
    SHARDED_RUNS,
    SHARDED_TASK,
    SHARED_DATA,
    dcpmi_once,
    embedded_model_args,
    lm_eval_once,
    plugin_task_manager,
)


def pytest_configure(config: pytest.Config) -> None:
    if not SHARED_DATA.is_dir() and os.environ.get("DCPMI_REQUIRE_DATA") == "1":
        raise pytest.UsageError(MISSING_DATA.format(path=SHARED_DATA))
    environment = pytest.MonkeyPatch()
    config.add_cleanup(environment.undo)
    # No network: the embedded model and the data are local files.
    environment.setenv("HF_HUB_OFFLINE", "1")
    environment.setenv("HF_DATASETS_OFFLINE", "1")
    environment.setenv("DCPMI_DATA_DIR", str(SHARED_DATA))  # read by the task YAMLs' loaders
    if "TOKENIZERS_PARALLELISM" not in os.environ:
        environment.setenv("TOKENIZERS_PARALLELISM", "false")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        # Under pytest-xdist (scripts/test.sh: -n 2) the workers share the cores: one torch
        # thread each, in this process and in the lm_eval runs it starts, not two per core
        # (torch, imported later, reads this).
        threads = max(1, (os.cpu_count() or 1) // workers)
        environment.setenv("OMP_NUM_THREADS", str(threads))


# The fixtures that load the embedded model or read the evaluation data (each fixture that
# builds on one, e.g. `prefix_lm` on `hf_lm`, counts too): no test of the fast tier uses one.
NOT_FAST = {"hf_lm", "lm_eval_run", "task_manager", "data_dir", "shard_runs"}
# The fixtures that load the embedded model: a test using one is marked `model`, and the
# other lm-eval releases run it only when it is marked `api` too (helpers.OTHER_RELEASES).
MODEL_FIXTURES = {"hf_lm", "lm_eval_run", "studies_run", "shard_runs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check the fast tier's marks; without the data, skip (with one reason) every test that
    needs it."""
    wrong = [
        item.nodeid
        for item in items
        if item.get_closest_marker("fast")
        and (item.get_closest_marker("slow") or NOT_FAST & set(getattr(item, "fixturenames", ())))
    ]
    if wrong:
        raise pytest.UsageError(
            "marked fast, but slow or using the model or the data: " + ", ".join(wrong)
        )
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
    if SHARED_DATA.is_dir():
        return
    skip = pytest.mark.skip(reason=MISSING_DATA.format(path=SHARED_DATA))
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The evaluation data. A test that reads it without this fixture's value names it with
    ``@pytest.mark.usefixtures("data_dir")``: it is then skipped when the data is missing."""
    return SHARED_DATA


@pytest.fixture(scope="session")
def task_manager(data_dir):
    """A TaskManager that knows the plugin's tasks and the embedded model's tokenizer
    (helpers.plugin_task_manager: the one ``evaluate`` uses)."""
    return plugin_task_manager()


@pytest.fixture(scope="session")
def hf_lm():
    """The embedded model loaded once through lm-eval's `hf` backend (~15 s)."""
    from lm_eval.models.huggingface import HFLM

    from lm_eval_dcpmi import embedded

    embedded.parse_once()
    return HFLM(**embedded_model_args(), device="cpu", batch_size=8)


# ---------------------------------------------------------------- one real lm_eval CLI run
# The end-to-end and report tests share one run of the real `lm_eval` command on the
# embedded model: every dcpmi task (helpers.E2E_TASKS), E2E_LIMIT documents each, samples
# logged.


class LmEvalRun:
    def __init__(self, output_dir: Path, stdout: str) -> None:
        self.output_dir = output_dir
        self.stdout = stdout
        (self.results_file,) = output_dir.rglob("results_*.json")
        self.results = json.loads(self.results_file.read_text())

    def samples(self, task: str) -> list[dict]:
        (path,) = self.output_dir.rglob(f"samples_{task}_*.jsonl")
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="session")
def lm_eval_run(tmp_path_factory, data_dir) -> LmEvalRun:
    return LmEvalRun(*lm_eval_once(tmp_path_factory, "lm_eval_run", E2E_TASKS))


@pytest.fixture(scope="session")
def shard_runs(tmp_path_factory, data_dir) -> Mapping[str, Path]:
    """``dcpmi run --tasks dcpmi_cb`` whole and in 3 shards (helpers.SHARDED_RUNS):
    name -> its output folder, each run when first asked for (the fuzz tier reads the
    shards alone)."""
    return ShardRuns(tmp_path_factory)


class ShardRuns(Mapping[str, Path]):
    def __init__(self, tmp_path_factory) -> None:
        self.tmp_path_factory = tmp_path_factory

    def __getitem__(self, name: str) -> Path:
        base = ["--model", "hf", "--batch_size", "1", "--tasks", SHARDED_TASK]
        extra = SHARDED_RUNS[name]
        return dcpmi_once(self.tmp_path_factory, f"shards_{name}", [*base, *extra])

    def __iter__(self) -> Iterator[str]:
        return iter(SHARDED_RUNS)

    def __len__(self) -> int:
        return len(SHARDED_RUNS)
