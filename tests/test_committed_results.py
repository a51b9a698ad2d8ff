"""The committed results verify: `dcpmi verify` builds their documents and requests again
from the data and recomputes every number from the compact samples (each request's
loglikelihood) committed beside them. Every folder but the full splits whole here, and the
full splits' smaller tasks; the whole folder with `dcpmi verify results/full` (a few
minutes: HellaSwag's 80,336 requests)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import ROOT, skip_unless_rebuilt_hellaswag

from lm_eval_dcpmi import cli

RESULTS = ROOT / "results"
FULL = RESULTS / "full"
SMALLER = ("dcpmi_copa", "dcpmi_cb", "dcpmi_rte", "dcpmi_obqa", "dcpmi_trec")


def results_file(task: str) -> Path:
    (path,) = [
        p for p in FULL.glob("results_*.json") if task in json.loads(p.read_text())["results"]
    ]
    return path


@pytest.mark.usefixtures("data_dir")
def test_the_smaller_full_splits_verify(capsys):
    status = cli.main(["verify", *(str(results_file(task)) for task in SMALLER)])
    out, err = capsys.readouterr()
    assert status == 0, err
    for task in SMALLER:
        data = json.loads(results_file(task).read_text())
        n = data["n-samples"][task]["original"]
        assert f"{task}: {n} documents rebuilt and recomputed" in out
    assert "every document and request rebuilt from the data, every number recomputes" in out


@pytest.mark.fast
def test_every_full_split_commits_its_loglikelihoods_and_data_digests():
    tasks = {}
    for path in FULL.glob("results_*.json"):
        data = json.loads(path.read_text())
        for task, config in data["configs"].items():
            tasks[task] = config["metadata"]["data_files"]
            stamp = path.name.removeprefix("results_").removesuffix(".json")
            samples = path.with_name(f"samples_{task}_{stamp}.jsonl.gz")
            with gzip.open(samples, "rt", encoding="utf-8") as lines:
                first = json.loads(next(lines))
            assert first["doc_id"] == 0 and first["filtered_resps"], samples
    assert len(tasks) == 16 and all(tasks.values())


@pytest.mark.parametrize("folder", ["limit100", "priors", "studies"])
def test_every_other_committed_folder_verifies(capsys, folder, data_dir):
    files = sorted((RESULTS / folder).glob("results_*.json"))
    assert files, f"results/{folder} holds no results file"
    if any(
        "hellaswag" in task for path in files for task in json.loads(path.read_text())["results"]
    ):
        skip_unless_rebuilt_hellaswag(data_dir)  # these runs read the rebuilt file
    status = cli.main(["verify", str(RESULTS / folder)])
    out, err = capsys.readouterr()
    assert status == 0, err
    tasks = {t for path in files for t in json.loads(path.read_text())["n-samples"]}
    recomputed = {
        line.split(": ")[0] for line in out.splitlines() if "rebuilt and recomputed" in line
    }
    assert tasks <= recomputed
    assert f"verified: {len(files)} results file(s), " in out


@pytest.mark.fast
def test_every_committed_folder_is_verified_here():
    """A new folder under results is verified by a test too (full: its smaller tasks)."""
    folders = {p.parent.name for p in RESULTS.glob("*/results_*.json")}
    assert folders == {"full", "limit100", "priors", "studies"}
