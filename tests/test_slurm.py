"""The job files of ``scripts/slurm/`` on a real SLURM cluster, with the scheduler's faults.

Runs where the one-node cluster of ``scripts/slurm/local_cluster.sh`` answers (its own
``slurm.conf``, never a machine's other SLURM): ``scripts/test.sh`` brings it up, as root
where apt-get works, after the other tests, runs this module (``-m slurm``) and stops it.
Elsewhere the module is skipped with one reason.

One run, ``run_with_faults``: CB (56 documents) in 3 shards at ``dcpmi run``'s default
batch size, submitted with ``submit.sh`` from a copy of ``settings.sh`` that sets the
embedded model, the task, N and the output folder, beside the unsharded run (one more job).
While it runs, the scheduler does what schedulers do:

* shard 2 fails (its node lacks the Python environment: the settings point it elsewhere
  until the test "fixes" it), so SLURM cancels the dependent merge job;
* shard 3 is requeued while it scores (``scontrol requeue``, then ``StartTime=now`` instead
  of SLURM's 2-minute wait), and scores again from the start;
* shard 1 runs a second time once it is whole (requeued after it ended);
* merges started by hand before every shard is whole refuse, unless ``--allow-partial``;
* shard 2 is submitted again at once (``submit.sh 2``, as docs/harness.md says), while
  the others still score, and its merge job, which waits for them too, merges, verifies
  and writes the report.

Then the merged run is the unsharded one within the tolerance docs/harness.md states for the
default batch size (``LL_TOLERANCE``, ``PROBABILITY_TOLERANCE``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import DCPMI, ROOT, SHARDED_TASK

from lm_eval_dcpmi._harness._logged import logged_loglikelihood

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("data_dir")]

SLURM_DIR = ROOT / "scripts" / "slurm"
SLURM_CONF = Path(os.environ.get("DCPMI_SLURM_DIR", "/tmp/dcpmi-slurm")) / "slurm.conf"
SHARDS = 3
# What "equal" means at the default batch size (docs/harness.md): a shard batches other
# documents together than the whole run, and the loglikelihoods move in the last bits.
# Every request's loglikelihood within LL_TOLERANCE of the unsharded run's (7.0e-5 at most
# on CB, 2026-12-06); probabilities computed from them within PROBABILITY_TOLERANCE,
# relative (pma: 1.2e-6); every accuracy and count equal.
LL_TOLERANCE = 1e-4
PROBABILITY_TOLERANCE = 2e-4
CONTINUOUS = ("pma", "pma_domain")  # the metrics that are probabilities, not picks or counts
WAIT_S = 900  # the longest any step may take on a loaded machine (the whole run: see the docs)
JOB_MEMORY = "--mem=2500M"


def _cluster_reason() -> str | None:
    """Why no cluster can be used here (None: it answers)."""
    if shutil.which("sbatch") is None:
        return "SLURM is not installed here (scripts/slurm/local_cluster.sh start installs it)"
    if not SLURM_CONF.is_file():
        return f"no local cluster ({SLURM_CONF} missing: scripts/slurm/local_cluster.sh start)"
    try:
        states = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=slurm_env(), capture_output=True, text=True, timeout=20
        ).stdout.split()
    except subprocess.TimeoutExpired:
        states = []
    if not {"idle", "mixed", "allocated"} & set(states):
        return f"the local SLURM cluster of {SLURM_CONF} does not answer (sinfo: {states})"
    return None


def slurm_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(SLURM_CONF), **extra}


reason = _cluster_reason()
if reason is not None:
    pytest.skip(f"SLURM tests skipped: {reason}", allow_module_level=True)


# ------------------------------------------------------------------ talking to SLURM


def slurm(*command: str) -> str:
    done = subprocess.run(command, env=slurm_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr}"
    return done.stdout


def job(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields of one job (or array task ``JOB_K``)."""
    line = slurm("scontrol", "show", "job", "-o", job_id).strip()
    return dict(re.findall(r"(\w+)=(\S*)", line))


def queued(job_id: str) -> list[str]:
    """The tasks of ``job_id`` still pending or running."""
    return slurm("squeue", "-h", "-j", job_id, "-o", "%i").split()


def wait_for(what: str, check, logs: Path, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    tails = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in sorted(logs.glob("*.out")))
    raise AssertionError(f"waited {timeout} s for {what}\n{slurm('squeue')}\n{tails}")


def requeue_now(job_id: str, logs: Path) -> None:
    """``scontrol requeue``, then the task started again at once (not 2 minutes later)."""
    slurm("scontrol", "requeue", job_id)
    wait_for(f"{job_id} pending again", lambda: job(job_id)["JobState"] == "PENDING", logs)
    slurm("scontrol", "update", f"JobId={job_id}", "StartTime=now")


def submit(settings: Path, *indices: str) -> tuple[str, str, str]:
    """``submit.sh [INDICES]``: (the shard array's job id, the merge job's, what it printed)."""
    done = subprocess.run(
        [str(SLURM_DIR / "submit.sh"), *indices],
        env=slurm_env(DCPMI_SLURM_SETTINGS=str(settings)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    shards = re.search(r"^shards: job (\d+)", done.stdout, re.M)
    merge = re.search(r"^merge: job (\d+)", done.stdout, re.M)
    assert shards and merge, done.stdout
    return shards[1], merge[1], done.stdout


def settings_copy(path: Path, **values: str) -> str:
    """scripts/slurm/settings.sh with these variables set: the file a user edits, with the
    test's values (each variable must be there, once)."""
    text = (SLURM_DIR / "settings.sh").read_text()
    for name, value in values.items():
        pattern = re.compile(rf"^(export )?{name}=.*$", re.M)
        text, found = pattern.subn(lambda m, n=name, v=value: f"{m[1] or ''}{n}={v}", text)
        assert found == 1, f"settings.sh sets {name} {found} times"
    path.write_text(text)
    return text


def dcpmi_merge(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DCPMI, "merge", *map(str, args)], capture_output=True, text=True, timeout=600
    )


def whole_shards(out: Path) -> list[Path]:
    return sorted(p for p in (out / "shards").iterdir() if p.is_dir() and p.name.isdigit())


# ------------------------------------------------------------------ the run


@dataclass
class Observed:
    out: Path  # the run's OUTPUT
    whole: Path  # the unsharded run's --output_path
    shards_job: str
    first_merge: dict[str, str]  # the first merge job, once the array ended
    early: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    early_missing: list[int] = field(default_factory=list)
    partial: Path | None = None  # the --allow-partial merge's folder
    resubmitted: str = ""  # what submit.sh 2 printed
    after_failure: subprocess.CompletedProcess | None = None
    hidden_after_array: list[str] = field(default_factory=list)
    second_merge: dict[str, str] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)  # a misfit array's task logs


@pytest.fixture(scope="module")
def run_with_faults(tmp_path_factory, data_dir) -> Observed:
    root = tmp_path_factory.mktemp("slurm")
    out, settings = root / "run", root / "settings.sh"
    settings_copy(
        settings,
        SHARDS=str(SHARDS),
        OUTPUT=str(out),
        TASKS=SHARDED_TASK,
        MODEL="(--model hf)",  # dcpmi run's default model arguments: the embedded model
        RUN_OPTIONS="()",  # the default batch size
        DCPMI=DCPMI,
        DCPMI_DATA_DIR=str(data_dir),
        HF_HOME=str(root / "huggingface"),
        SHARD_SBATCH=f"(--cpus-per-task=1 {JOB_MEMORY})",
        MERGE_SBATCH=f"(--cpus-per-task=1 {JOB_MEMORY})",
    )
    with settings.open("a") as file:  # the fault: shard 2's node lacks the environment
        file.write(
            '\nif [ "${SLURM_ARRAY_TASK_ID:-}" = 2 ] && [ ! -e "$OUTPUT/fixed" ]; then\n'
            "    DCPMI=$OUTPUT/no-environment/bin/dcpmi\nfi\n"
        )
    logs = out / "logs"
    shards_job, first_merge, _printed = submit(settings)
    whole = root / "whole"
    unsharded = slurm(
        "sbatch", "--parsable", "--cpus-per-task=1", JOB_MEMORY, f"--output={logs}/whole.out",
        f"--export=ALL,OMP_NUM_THREADS=1,DCPMI_DATA_DIR={data_dir}",
        "--wrap", f"{DCPMI} run --model hf --tasks {SHARDED_TASK} --log_samples "
        f"--output_path {whole}",
    ).strip()  # fmt: skip
    # an array that is not 1-N: each of its tasks refuses in one line, before any model loads
    misfit = slurm(
        "sbatch", "--parsable", "--array=2-3", JOB_MEMORY, f"--output={logs}/misfit-%a.out",
        "--wrap", f"{DCPMI} run --model hf --tasks {SHARDED_TASK} --shard slurm",
    ).strip()  # fmt: skip

    # shard 2 failed: fixed and submitted again at once, while shards 1 and 3 still score;
    # its merge job waits for the first array too
    wait_for("shard 2 failed", lambda: job(f"{shards_job}_2")["JobState"] == "FAILED", logs)
    (out / "fixed").touch()
    _again, second_merge, resubmitted = submit(settings, "2")

    # shard 3, requeued while it scores
    shard_3 = logs / "shard-3.out"
    wait_for(
        "shard 3 scoring",
        lambda: shard_3.is_file() and "Running loglikelihood requests" in shard_3.read_text(),
        logs,
    )
    requeue_now(f"{shards_job}_3", logs)

    # shard 1 whole: a merge by hand refuses what is unfinished, unless --allow-partial
    wait_for("shard 1 whole", lambda: (out / "shards" / "1").is_dir(), logs)
    observed = Observed(out, whole, shards_job, {}, resubmitted=resubmitted)
    folders = whole_shards(out)
    observed.early_missing = [k for k in range(1, SHARDS + 1) if out / f"shards/{k}" not in folders]
    observed.early["refused"] = dcpmi_merge(*folders, "--out", root / "early")
    observed.partial = root / "partial"
    observed.early["partial"] = dcpmi_merge(*folders, "--out", observed.partial, "--allow-partial")

    # shard 1 again once whole (requeued after it ended)
    wait_for("shard 1 completed", lambda: job(f"{shards_job}_1")["JobState"] == "COMPLETED", logs)
    requeue_now(f"{shards_job}_1", logs)

    wait_for("the first array's end", lambda: not queued(shards_job), logs)
    observed.first_merge = wait_for(
        "the first merge job's end",
        lambda: (state := job(first_merge))["JobState"] != "PENDING" and state,
        logs,
    )
    observed.hidden_after_array = sorted(p.name for p in (out / "shards").glob(".3.*"))
    first_array = [out / "shards" / "1", out / "shards" / "3"]  # what it left whole
    observed.after_failure = dcpmi_merge(*first_array, "--out", root / "after")
    wait_for("the misfit array's end", lambda: not queued(misfit), logs)
    observed.refusals = {k: (logs / f"misfit-{k}.out").read_text() for k in ("2", "3")}

    # the resubmitted shard's merge job merges, verifies, reports
    observed.second_merge = wait_for(
        "the second merge job's end",
        lambda: (state := job(second_merge))["JobState"] not in ("PENDING", "RUNNING") and state,
        logs,
    )
    wait_for("the unsharded run", lambda: not queued(unsharded), logs)
    assert job(unsharded)["JobState"] == "COMPLETED", (logs / "whole.out").read_text()[-3000:]
    return observed


# ------------------------------------------------------------------ what it left


def results_of(folder: Path) -> tuple[dict, list[dict]]:
    (path,) = folder.rglob("results_*.json")
    (samples,) = folder.rglob(f"samples_{SHARDED_TASK}_*.jsonl")
    return json.loads(path.read_text()), [json.loads(x) for x in samples.read_text().splitlines()]


def one_line(done: subprocess.CompletedProcess) -> str:
    (line,) = done.stderr.strip().splitlines()
    return line


def test_the_resubmitted_run_merges_verifies_and_reports(run_with_faults):
    observed = run_with_faults
    assert observed.second_merge["JobState"] == "COMPLETED", observed.second_merge
    log = (observed.out / "logs" / f"merge-{observed.second_merge['JobId']}.out").read_text()
    assert f"{SHARDED_TASK}: 56 documents rebuilt and recomputed" in log
    assert f"dcpmi-merge: {observed.out}/merged verified, report in {observed.out}/report" in log
    assert "| dcpmi_cb | 56 |" in (observed.out / "report" / "report.md").read_text()
    data, _samples = results_of(observed.out / "merged")
    assert data["dcpmi"]["merged"]["shards"] == SHARDS and "partial" not in data["dcpmi"]["merged"]


def test_the_merged_run_is_the_unsharded_one_within_the_stated_tolerance(run_with_faults):
    merged, merged_samples = results_of(run_with_faults.out / "merged")
    whole, whole_samples = results_of(run_with_faults.whole)
    got, want = merged["results"][SHARDED_TASK], whole["results"][SHARDED_TASK]
    assert got.keys() == want.keys()
    assert merged["n-samples"] == whole["n-samples"]
    for key, value in want.items():
        if key.partition(",")[0].removesuffix("_stderr") in CONTINUOUS:
            assert math.isclose(got[key], value, rel_tol=PROBABILITY_TOLERANCE, abs_tol=1e-12), key
        else:  # every accuracy, count and standard error of an accuracy: equal
            assert got[key] == value, key
    assert [s["doc_id"] for s in merged_samples] == list(range(56))
    farthest = 0.0
    for mine, theirs in zip(merged_samples, whole_samples, strict=True):
        assert mine["arguments"] == theirs["arguments"]  # the same requests, CC's on doc 0
        for a, b in zip(mine["filtered_resps"], theirs["filtered_resps"], strict=True):
            farthest = max(
                farthest, abs(float(logged_loglikelihood(a)) - float(logged_loglikelihood(b)))
            )
        for metric in ("acc", "acc_norm", "acc_unc", "acc_avg", "acc_dcpmi", "acc_cc"):
            assert mine[metric] == theirs[metric], (mine["doc_id"], metric)
        *probabilities, gold = mine["acc_bc"]
        assert gold == theirs["acc_bc"][-1]
        for p, q in zip(probabilities, theirs["acc_bc"][:-1], strict=True):
            assert math.isclose(p, q, rel_tol=PROBABILITY_TOLERANCE)
    assert farthest <= LL_TOLERANCE


def test_a_failed_shard_cancels_the_merge_job_and_merge_names_it(run_with_faults):
    observed = run_with_faults
    first = observed.first_merge
    assert (first["JobState"], first["Reason"]) == ("CANCELLED", "DependencyNeverSatisfied")
    assert not (observed.out / "logs" / f"merge-{first['JobId']}.out").exists()  # never ran
    failed = job(f"{observed.shards_job}_2")
    assert (failed["JobState"], failed["ExitCode"]) == ("FAILED", "127:0")
    log = (observed.out / "logs" / "shard-2.out").read_text()
    assert f"{observed.out}/no-environment/bin/dcpmi: No such file or directory" in log
    done = observed.after_failure
    assert done.returncode == 2
    assert one_line(done) == (
        f"dcpmi merge: shard 2/{SHARDS} missing (merging 2 of {SHARDS}); give every shard's "
        "folder, or --allow-partial to merge these and mark the result partial."
    )
    # submitted again at once, its merge job waited for the first array's tasks too
    assert (
        f"once every shard task succeeded and earlier shard job(s) {observed.shards_job} ended"
        in observed.resubmitted
    )
    # submitted again, it scored: its log holds both runs
    assert log.count("dcpmi-shard: task 2 of job") == 2
    assert f"dcpmi-shard: shard 2/{SHARDS} is whole: {observed.out}/shards/2" in log


def test_a_shard_requeued_while_it_scores_leaves_one_whole_shard(run_with_faults):
    observed = run_with_faults
    log = (observed.out / "logs" / "shard-3.out").read_text()
    killed, requeue, again = log.partition("DUE TO JOB REQUEUE")
    assert requeue, log[-3000:]
    # stopped while it scored, before its shard was whole; then scored from the start
    assert "Running loglikelihood requests" in killed and "is whole" not in killed
    assert re.search(r"dcpmi-shard: task 3 of job \d+ on \S+ restart 0,", killed)
    assert re.search(r"dcpmi-shard: task 3 of job \d+ on \S+ restart 1,", again)
    assert again.count(f"dcpmi: --shard: shard 3/{SHARDS} (") == 1
    assert f"dcpmi-shard: shard 3/{SHARDS} is whole: {observed.out}/shards/3" in again
    shard = observed.out / "shards" / "3"
    assert len(list(shard.rglob("results_*.json"))) == 1
    assert len(list(shard.rglob("samples_*.jsonl"))) == 1
    assert observed.hidden_after_array == []  # the killed attempt's folder went with it


def test_a_shard_run_again_once_whole_changes_nothing(run_with_faults):
    observed = run_with_faults
    log = (observed.out / "logs" / "shard-1.out").read_text()
    shard = observed.out / "shards" / "1"
    first, _placed, again = log.partition(f"dcpmi-shard: shard 1/{SHARDS} is whole: {shard}")
    assert "restart 0," in first and "restart 1," in again
    assert f"dcpmi-shard: {shard} is whole already (this shard ran before); nothing to do" in again
    assert "dcpmi: --shard:" not in again  # nothing scored the second time
    assert job(f"{observed.shards_job}_1")["Restarts"] == "1"
    assert len(list(shard.rglob("results_*.json"))) == 1


def test_a_merge_started_by_hand_before_every_shard_is_whole_refuses(run_with_faults):
    observed = run_with_faults
    missing = observed.early_missing
    assert 1 not in missing and {2, 3} & set(missing)
    names = ", ".join(f"{k}/{SHARDS}" for k in missing)
    refused = observed.early["refused"]
    assert refused.returncode == 2
    assert one_line(refused) == (
        f"dcpmi merge: shard {names} missing (merging {SHARDS - len(missing)} of {SHARDS}); "
        "give every shard's folder, or --allow-partial to merge these and mark the result "
        "partial."
    )
    partial = observed.early["partial"]
    assert partial.returncode == 0, partial.stderr
    assert observed.partial is not None
    data, samples = results_of(observed.partial)
    assert data["dcpmi"]["merged"]["partial"] is True
    assert data["dcpmi"]["merged"]["missing"] == [f"{k}/{SHARDS}" for k in missing]
    assert len(samples) == 56 - sum(len(range(k - 1, 56, SHARDS)) for k in missing)


def test_an_array_that_is_not_1_to_n_is_refused_by_each_task(run_with_faults):
    for task, log in run_with_faults.refusals.items():
        assert (
            "dcpmi: --shard slurm: the array 2-3 (2 tasks) does not start at 1; shards are "
            "1..N: submit --array=1-N (or give N for some of them only: --shard slurm/N)."
        ) in log.splitlines(), task
