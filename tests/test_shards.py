"""`dcpmi run --shard K/N` and `dcpmi merge`: shards that join into exactly the unsharded run.

The fast tests check the shares and the option's errors. The others use the real runs of
``conftest.shard_runs`` (CB, 56 documents with CC and BC: whole, in 2 shards and in 3) and
hand-edited copies of them for every shard `merge` must refuse.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers import SHARDED_TASK, read_only_file_system

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.cli._run_options import RunOptions, refuse_combinations, split_run_options
from lm_eval_dcpmi.cli._shard_option import parse_shard
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.merging._shard_bounds import check_documents_once, recorded_shard
from lm_eval_dcpmi.task._shards import Shard, shard_samples

# ------------------------------------------------------------------ the shares


@pytest.mark.fast
def test_shard_k_of_n_holds_every_nth_document_from_k_minus_1():
    assert Shard(1, 3).indices(10) == [0, 3, 6, 9]
    assert Shard(2, 3).indices(10) == [1, 4, 7]
    assert Shard(3, 3).indices(10) == [2, 5, 8]
    shares = [Shard(k, 4).indices(10_042) for k in range(1, 5)]
    assert sorted(i for share in shares for i in share) == list(range(10_042))  # once each
    assert [len(s) for s in shares] == [2511, 2511, 2510, 2510]


@pytest.mark.fast
@pytest.mark.parametrize(
    "value", ["0/4", "5/4", "1/0", "2", "a/b", "-1/4", "1/4/2", "", "\u00b9/2", "1/\u00b2"]
)
def test_a_shard_that_is_not_k_of_n_is_refused(value):
    with pytest.raises(DCPMIError, match=r"give K/N, shard K of N with 1 <= K <= N"):
        parse_shard(value)


@pytest.mark.fast
def test_the_shard_option_is_taken_out_of_the_command_line():
    options, rest = split_run_options(["--tasks", "x", "--shard", "2/4", "--log_samples"])
    assert (options.shard, rest) == (Shard(2, 4), ["--tasks", "x", "--log_samples"])
    assert split_run_options(["--shard=1/2"]) == (RunOptions(shard=Shard(1, 2)), [])
    with pytest.raises(DCPMIError, match="given twice"):
        split_run_options(["--shard", "1/2", "--shard", "2/2"])


@pytest.mark.fast
def test_a_shard_is_not_combined_with_limit_samples_or_quick_nor_emptier_than_one_document():
    with pytest.raises(DCPMIError, match="cannot be combined with --limit; drop one"):
        refuse_combinations(RunOptions(shard=Shard(1, 2)), limit=10, samples=None)
    assert shard_samples({"a": 5, "b": 3}, Shard(3, 3)) == {"a": [2], "b": [2]}
    with pytest.raises(DCPMIError, match="b has 3 document.s., fewer than 4 shards"):
        shard_samples({"a": 5, "b": 3}, Shard(4, 4))


# ------------------------------------------------------------------ K and N from the scheduler


def slurm_array(task: int, first: int, last: int, count: int, step: int = 1) -> dict[str, str]:
    """A SLURM array task's environment, as sbatch sets it (measured on slurm 22.05: a list
    such as --array=3,5 has a step of 1)."""
    values = {"ID": task, "MIN": first, "MAX": last, "COUNT": count, "STEP": step}
    return {
        "SLURM_JOB_ID": "41",
        **{f"SLURM_ARRAY_TASK_{name}": str(value) for name, value in values.items()},
    }


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "environ", "shard"),
    [
        ("slurm", slurm_array(3, 1, 8, 8), Shard(3, 8)),
        ("SLURM", slurm_array(1, 1, 1, 1), Shard(1, 1)),
        ("slurm/8", slurm_array(3, 1, 8, 8), Shard(3, 8)),
        ("slurm/8", slurm_array(3, 3, 3, 1), Shard(3, 8)),  # shard 3 submitted again
        ("slurm/8", slurm_array(5, 2, 5, 2), Shard(5, 8)),  # --array=2,5
        ("slurm/8", slurm_array(4, 2, 6, 3, step=2), Shard(4, 8)),  # --array=2-6:2
        ("slurm/8", {**slurm_array(3, 1, 8, 8), "SLURM_ARRAY_TASK_ID": "03"}, Shard(3, 8)),
        ("kubernetes/4", {"JOB_COMPLETION_INDEX": "0"}, Shard(1, 4)),
        ("k8s/4", {"JOB_COMPLETION_INDEX": "3"}, Shard(4, 4)),
    ],
)
def test_the_scheduler_gives_k_and_n(value, environ, shard):
    assert parse_shard(value, environ=environ) == shard


@pytest.mark.fast
def test_a_scheduler_shard_says_where_k_came_from():
    shard = parse_shard("slurm", environ=slurm_array(3, 1, 8, 8))
    assert shard.source == "SLURM_ARRAY_TASK_ID=3 of the array 1-8 (8 tasks)"
    shard = parse_shard("kubernetes/4", environ={"JOB_COMPLETION_INDEX": "2"})
    assert (str(shard), shard.source) == ("3/4", "JOB_COMPLETION_INDEX=2")


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "environ", "message"),
    [
        (
            "slurm",
            {},
            "--shard slurm: SLURM_ARRAY_TASK_ID is not set (not a task of a SLURM array job); "
            "submit it with sbatch --array=1-N, or give --shard K/N.",
        ),
        (
            "slurm",
            {"SLURM_JOB_ID": "7"},
            "--shard slurm: SLURM_ARRAY_TASK_ID is not set (a SLURM job, but not a task of an "
            "array job); submit it with sbatch --array=1-N, or give --shard K/N.",
        ),
        (
            "slurm",
            {k: v for k, v in slurm_array(1, 1, 8, 8).items() if not k.endswith("COUNT")},
            "--shard slurm: SLURM_ARRAY_TASK_COUNT is not set; run it as a task of an array "
            "job (sbatch --array=1-N), or give --shard K/N.",
        ),
        (
            "slurm",
            slurm_array(3, 1, 7, 4, step=2),  # --array=1-8:2
            "--shard slurm: the array 1-7:2 (4 tasks) has a step of 2, so the shards between "
            "its tasks would never run; submit --array=1-N.",
        ),
        (
            "slurm",
            slurm_array(0, 0, 7, 8),  # --array=0-7
            "--shard slurm: the array 0-7 (8 tasks) does not start at 1; shards are 1..N: "
            "submit --array=1-N (or give N for some of them only: --shard slurm/N).",
        ),
        (
            "slurm",
            slurm_array(4, 1, 4, 3),  # --array=1,2,4
            "--shard slurm: the array 1-4 (3 tasks) holds 3 tasks but goes up to 4, so its "
            "count differs from N; submit --array=1-N (or give N: --shard slurm/N).",
        ),
        (
            "slurm/8",
            slurm_array(9, 1, 9, 9),  # --array=1-9 for 8 shards
            "--shard slurm/8: the array 1-9 (9 tasks) holds indices outside the shards 1-8; "
            "submit --array=1-8, or only the shards to run again (e.g. --array=3).",
        ),
        (
            "slurm/8",
            slurm_array(0, 0, 7, 8),
            "--shard slurm/8: the array 0-7 (8 tasks) holds indices outside the shards 1-8; "
            "submit --array=1-8, or only the shards to run again (e.g. --array=3).",
        ),
        (
            "slurm/0",
            slurm_array(1, 1, 1, 1),
            "--shard slurm/0: N must be a whole number of shards, 1 or more (e.g. --shard "
            "slurm/8).",
        ),
        (  # '¹'.isdigit() holds, but int('¹') fails: was ValueError
            "slurm/\u00b9",
            slurm_array(1, 1, 1, 1),
            "--shard slurm/\u00b9: N must be a whole number of shards, 1 or more (e.g. --shard "
            "slurm/8).",
        ),
        (
            "slurm",
            {**slurm_array(1, 1, 1, 1), "SLURM_ARRAY_TASK_ID": "\u00b9"},
            "--shard slurm: SLURM_ARRAY_TASK_ID is '\u00b9', not a whole number in the digits "
            "0-9 alone; run it as a task of an array job (sbatch --array=1-N), or give --shard "
            "K/N.",
        ),
        (
            "kubernetes",
            {"JOB_COMPLETION_INDEX": "0"},
            "--shard kubernetes: give N too, the Job's completions (e.g. --shard "
            "kubernetes/8): a pod of an Indexed Job knows only its own JOB_COMPLETION_INDEX.",
        ),
        (
            "kubernetes/4",
            {},
            "--shard kubernetes/4: JOB_COMPLETION_INDEX is not set (not a pod of an Indexed "
            "Job); run it in a Job with completionMode: Indexed and completions: 4, or give "
            "--shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "4"},
            "--shard k8s/4: JOB_COMPLETION_INDEX is 4, but 4 shards are indices 0-3; give "
            "the Job's completions as N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "-1"},
            "--shard k8s/4: JOB_COMPLETION_INDEX is '-1', not a whole number in the digits "
            "0-9 alone (not a pod of an Indexed Job); run it in a Job with completionMode: "
            "Indexed and completions: 4, or give --shard K/N.",
        ),
    ],
)
def test_scheduler_variables_missing_or_unfit_are_refused_in_one_line(value, environ, message):
    with pytest.raises(DCPMIError) as refused:
        parse_shard(value, environ=environ)
    assert str(refused.value) == message


FIX = (
    "SLURM sets these variables itself: unset any set by hand and submit the job with sbatch "
    "--array=1-{n}, or give --shard K/N."
)


def refusal(value: str, environ: dict[str, str]) -> str:
    with pytest.raises(DCPMIError) as refused:
        parse_shard(value, environ=environ)
    return str(refused.value)


@pytest.mark.fast
def test_slurm_task_id_0_of_the_array_1_to_8_is_refused_not_shard_0_of_8():
    # was Shard(0, 8): documents -1 (Python's last), 7, 15, ...
    assert refusal("slurm", slurm_array(0, 1, 8, 8)) == (
        "--shard slurm: SLURM_ARRAY_TASK_ID is 0, outside the array 1-8 (8 tasks); "
        + FIX.format(n="N")
    )


@pytest.mark.fast
def test_slurm_task_id_9_of_the_array_1_to_8_is_refused_not_shard_9_of_8():
    # was Shard(9, 8): documents 8, 16, ..., shard 1's
    assert refusal("slurm", slurm_array(9, 1, 8, 8)) == (
        "--shard slurm: SLURM_ARRAY_TASK_ID is 9, outside the array 1-8 (8 tasks); "
        + FIX.format(n="N")
    )


@pytest.mark.fast
def test_slurm_n_task_id_6_for_4_shards_is_refused_not_shard_6_of_4():
    assert refusal("slurm/4", slurm_array(6, 1, 4, 4)) == (
        "--shard slurm/4: SLURM_ARRAY_TASK_ID is 6, outside the array 1-4 (4 tasks); "
        + FIX.format(n=4)
    )
    assert refusal("slurm/4", slurm_array(6, 6, 6, 1)) == (  # --array=6: a consistent array
        "--shard slurm/4: the array 6-6 (1 task) holds indices outside the shards 1-4; "
        "submit --array=1-4, or only the shards to run again (e.g. --array=3)."
    )


@pytest.mark.fast
@pytest.mark.parametrize("task", [0, 1])
def test_an_empty_slurm_array_is_refused_in_one_line_not_a_traceback(task):
    # was ValueError: range() arg 3 must not be zero
    assert refusal("slurm", slurm_array(task, 1, 0, 0)) == (
        "--shard slurm: SLURM_ARRAY_TASK_COUNT is 0, so the array 1-0 (0 tasks) is empty; "
        + FIX.format(n="N")
    )


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "environ", "message"),
    [
        (
            "slurm",
            slurm_array(1, 1, 8, 8, step=0),
            "SLURM_ARRAY_TASK_STEP is 0, so the array 1-8:0 (8 tasks) never steps on; "
            + FIX.format(n="N"),
        ),
        (
            "slurm",
            slurm_array(1, 1, 8, 9),
            "SLURM_ARRAY_TASK_COUNT is 9, but an array 1-8 holds 2 to 8 tasks; "
            + FIX.format(n="N"),
        ),
        (
            "slurm",
            slurm_array(1, 1, 1, 2),
            "SLURM_ARRAY_TASK_COUNT is 2, but an array 1-1 holds 1 task; " + FIX.format(n="N"),
        ),
        (
            "slurm/8",
            slurm_array(1, 1, 7, 5, step=2),
            "SLURM_ARRAY_TASK_COUNT is 5, but an array 1-7:2 holds 2 to 4 tasks; "
            + FIX.format(n=8),
        ),
        (
            "slurm/8",
            slurm_array(3, 5, 3, 2),
            "SLURM_ARRAY_TASK_MIN is 5, above SLURM_ARRAY_TASK_MAX in the array 5-3 (2 tasks); "
            + FIX.format(n=8),
        ),
        (
            "slurm/8",
            slurm_array(2, 3, 5, 3),
            "SLURM_ARRAY_TASK_ID is 2, outside the array 3-5 (3 tasks); " + FIX.format(n=8),
        ),
        (
            "slurm/8",
            slurm_array(4, 1, 7, 4, step=2),
            "SLURM_ARRAY_TASK_ID is 4, between the indices of the array 1-7:2 (4 tasks), 2 "
            "apart; " + FIX.format(n=8),
        ),
        (
            "slurm",
            {**slurm_array(1, 1, 8, 8), "SLURM_ARRAY_TASK_ID": "-1"},
            "SLURM_ARRAY_TASK_ID is '-1', not a whole number in the digits 0-9 alone; run it as "
            "a task of an array job (sbatch --array=1-N), or give --shard K/N.",
        ),
        (
            "slurm",
            {**slurm_array(1, 1, 8, 8), "SLURM_ARRAY_TASK_ID": " 3"},
            "SLURM_ARRAY_TASK_ID is ' 3', not a whole number in the digits 0-9 alone; run it as "
            "a task of an array job (sbatch --array=1-N), or give --shard K/N.",
        ),
        (
            "slurm",
            {**slurm_array(1, 1, 8, 8), "SLURM_ARRAY_TASK_MAX": "9" * 5000},
            "SLURM_ARRAY_TASK_MAX is a number of 5000 digits, larger than any scheduler's; run "
            "it as a task of an array job (sbatch --array=1-N), or give --shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "\u00b9"},
            "JOB_COMPLETION_INDEX is '\u00b9', not a whole number in the digits 0-9 alone (not "
            "a pod of an Indexed Job); run it in a Job with completionMode: Indexed and "
            "completions: 4, or give --shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": " 3"},
            "JOB_COMPLETION_INDEX is ' 3', not a whole number in the digits 0-9 alone (not a "
            "pod of an Indexed Job); run it in a Job with completionMode: Indexed and "
            "completions: 4, or give --shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "\u0663"},  # ARABIC-INDIC DIGIT THREE: int() reads it
            "JOB_COMPLETION_INDEX is '\u0663', not a whole number in the digits 0-9 alone (not "
            "a pod of an Indexed Job); run it in a Job with completionMode: Indexed and "
            "completions: 4, or give --shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "9" * 5000},  # int() would fail past 4300 digits
            "JOB_COMPLETION_INDEX is a number of 5000 digits, larger than any scheduler's (not "
            "a pod of an Indexed Job); run it in a Job with completionMode: Indexed and "
            "completions: 4, or give --shard K/N.",
        ),
        (
            "k8s/4",
            {"JOB_COMPLETION_INDEX": "9" * 18},
            f"JOB_COMPLETION_INDEX is {'9' * 18}, but 4 shards are indices 0-3; give the Job's "
            "completions as N.",
        ),
    ],
)
def test_scheduler_values_that_are_no_index_of_the_array_are_refused(value, environ, message):
    assert refusal(value, environ) == f"--shard {value}: {message}"


@pytest.mark.fast
@pytest.mark.parametrize("value", ["slurm", "slurm/4"])
def test_no_slurm_array_gives_a_shard_outside_it_or_its_n(value):
    """Every SLURM array environment of numbers 0-5: a refusal, or K inside the array."""
    numbers, accepted = range(6), 0
    for task, first, last, tasks, step in itertools.product(numbers, repeat=5):
        environ = slurm_array(task, first, last, tasks, step)
        try:
            shard = parse_shard(value, environ=environ)
        except DCPMIError as refused:
            assert "\n" not in str(refused)
            continue
        assert 1 <= first <= shard.index <= last <= shard.count, environ
        assert step >= 1 and (shard.index - first) % step == 0, environ
        assert min(shard.indices(10), default=0) >= 0
        accepted += 1
    # slurm: the arrays 1-N, N 1..5 (1 + 2 + ... + 5); slurm/4: each consistent array within
    # 1-4 (any step, any count its range holds) and each task on it
    assert accepted == {"slurm": 15, "slurm/4": 58}[value]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("index", "count"), [(0, 8), (9, 8), (1, 0), (0, 0), (-1, 4), (True, 2), (1.0, 2)]
)
def test_a_shard_refuses_k_below_1_above_n_or_n_below_1_when_made(index, count):
    with pytest.raises(DCPMIError) as refused:
        Shard(index, count)
    assert str(refused.value) == (
        f"shard {index!r}/{count!r} is not K/N, shard K of N with whole numbers 1 <= K <= N "
        "(e.g. --shard 1/4 ... --shard 4/4)."
    )


@pytest.mark.fast
def test_no_shard_deals_a_negative_document_index():
    for count in range(1, 10):
        for index in range(1, count + 1):
            for documents in range(0, 25):
                assert all(i >= 0 for i in Shard(index, count).indices(documents))
    forced = Shard(1, 8)
    object.__setattr__(forced, "index", 0)  # past the frozen dataclass's guard
    with pytest.raises(DCPMIError, match=r"shard 0/8 is not K/N"):
        forced.indices(10)


@pytest.mark.fast
def test_dcpmi_run_refuses_shard_slurm_outside_an_array_job_in_one_line(capsys, monkeypatch):
    for name in [*os.environ]:
        if name.startswith("SLURM_"):
            monkeypatch.delenv(name)
    status = cli.main(["run", "--model", "dummy", "--tasks", "dcpmi_cb", "--shard", "slurm"])
    assert (status, capsys.readouterr().err) == (
        2,
        "dcpmi: --shard slurm: SLURM_ARRAY_TASK_ID is not set (not a task of a SLURM array "
        "job); submit it with sbatch --array=1-N, or give --shard K/N.\n",
    )


@pytest.mark.fast
@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ({"index": 3, "count": 2}, "3/2"),
        ({"index": 0, "count": 0}, "0/0"),
        ({"index": 1, "count": 0}, "1/0"),
        ({"index": -1, "count": 2}, "-1/2"),
        ({"index": "1", "count": 2}, "'1'/2"),
        ({"index": True, "count": 2}, "True/2"),
        ({"index": 1.0, "count": 2}, "1.0/2"),
    ],
)
def test_a_recorded_shard_that_is_not_k_of_n_is_refused(recorded, shown):
    with pytest.raises(DCPMIError) as refused:
        recorded_shard(Path("r.json"), recorded)
    assert str(refused.value) == (
        f"r.json: records shard {shown} (dcpmi.shard), not K/N with 1 <= K <= N; no run of "
        "dcpmi run --shard writes it; the file is edited or forged."
    )
    assert recorded_shard(Path("r.json"), {"index": 2, "count": 3}) == Shard(2, 3)
    with pytest.raises(DCPMIError, match="r.json: not a shard .its results record no dcpmi"):
        recorded_shard(Path("r.json"), None)


@pytest.mark.fast
def test_a_document_in_two_shards_is_refused():
    shares = [("shard 1/2 (a)", [{"doc_id": 0}, {"doc_id": 2}]), ("shard 2/2 (b)", [{"doc_id": 1}])]
    check_documents_once("dcpmi_cb", shares)  # each once: nothing to say
    shares.append(("shard 3/3 (c)", [{"doc_id": 4}, {"doc_id": 2}]))
    with pytest.raises(DCPMIError) as refused:
        check_documents_once("dcpmi_cb", shares)
    assert str(refused.value) == (
        "shard 3/3 (c) and shard 1/2 (a) both hold document 2 of dcpmi_cb: the shards "
        "overlap; give each shard of one run once."
    )


# ------------------------------------------------------------------ merging real shards


def _results(folder: Path) -> tuple[Path, dict]:
    (path,) = folder.rglob("results_*.json")
    return path, json.loads(path.read_text())


def _samples(folder: Path) -> list[dict]:
    (path,) = folder.rglob(f"samples_{SHARDED_TASK}_*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def merge(capsys, *args) -> tuple[int, str, str]:
    status = cli.main(["merge", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_shards_merge_into_exactly_the_unsharded_run(shard_runs, tmp_path, capsys):
    n = 3
    shards = [shard_runs[f"{k}of{n}"] for k in range(n, 0, -1)]  # any order
    status, out, err = merge(capsys, *shards, "--out", tmp_path / "merged")
    assert status == 0, err
    merged, whole = tmp_path / "merged", shard_runs["whole"]
    (_path, got), (_w, want) = _results(merged), _results(whole)
    # every metric, standard error and count (CC with document 0's content-free scores,
    # BC over all 56 documents), to the last bit
    assert got["results"] == want["results"]
    assert (
        got["n-samples"] == want["n-samples"] == {SHARDED_TASK: {"original": 56, "effective": 56}}
    )
    assert got["task_hashes"] == want["task_hashes"]
    assert got["dcpmi"]["merged"]["shards"] == n and "shard" not in got["dcpmi"]
    # the samples file line for line, the content-free requests on document 0 only
    assert _samples(merged) == _samples(whole)
    assert len(_samples(merged)[0]["arguments"]) == 3 * 2 + 3 * 3  # CB: 3 options
    assert all(len(s["arguments"]) == 6 for s in _samples(merged)[1:])
    status, out, err = verify(capsys, merged)
    assert status == 0, err
    assert f"{SHARDED_TASK}: 56 documents rebuilt and recomputed" in out


def verify(capsys, *args) -> tuple[int, str, str]:
    status = cli.main(["verify", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_a_shard_verifies_on_its_own_as_a_partial_run(shard_runs, capsys):
    status, out, err = verify(capsys, shard_runs["2of3"])
    assert status == 0, err
    assert f"{SHARDED_TASK}: 19 of 56 documents rebuilt and recomputed" in out


def _copy(shard_runs: dict[str, Path], tmp_path: Path, *names: str) -> list[Path]:
    copies = []
    for name in names:
        target = tmp_path / name
        shutil.copytree(shard_runs[name], target)
        copies.append(target)
    return copies


def _edit_results(folder: Path, edit) -> None:
    path, data = _results(folder)
    edit(data)
    path.write_text(json.dumps(data))


def _edit_samples(folder: Path, edit) -> None:
    (path,) = folder.rglob(f"samples_{SHARDED_TASK}_*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    edit(lines)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _refused(capsys, folders, out: Path, *parts: str) -> None:
    status, _out, err = merge(capsys, *folders, "--out", out)
    assert status == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("dcpmi merge: ")
    for part in parts:
        assert part in line, line
    assert not out.exists()  # nothing left behind


def _set(keys, value):
    def edit(data):
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return edit


@pytest.mark.slow
@pytest.mark.parametrize(
    ("keys", "value", "what"),
    [
        (("git_hash",), "0000000", "the commit (git_hash) differs"),
        (("dcpmi", "model", "id"), "EleutherAI/pythia-160m", "the model's identity"),
        (("lm_eval_version",), "0.4.12", "the lm-eval version"),
        (("configs", SHARDED_TASK, "metadata", "domain_premise"), "x", "the task configs"),
    ],
)
def test_merge_refuses_shards_of_another_run(shard_runs, tmp_path, capsys, keys, value, what):
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    _edit_results(two, _set(keys, value))
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "out",
        "shard 2/3 (",
        "not the same run as shard 1/3",
        what,
    )


@pytest.mark.slow
def test_merge_refuses_overlaps_gaps_and_marks_an_allowed_partial(shard_runs, tmp_path, capsys):
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    again = shutil.copytree(two, tmp_path / "2of3-again")  # the same shard scored twice
    _refused(capsys, [one, two, again, three], tmp_path / "a", "both shard 2/3", "overlap")
    _refused(capsys, [one, three], tmp_path / "b", "shard 2/3 missing", "--allow-partial")
    status, _out, err = merge(capsys, one, three, "--out", tmp_path / "c", "--allow-partial")
    assert status == 0, err
    _path, data = _results(tmp_path / "c")
    assert data["dcpmi"]["merged"]["partial"] is True
    assert data["dcpmi"]["merged"]["missing"] == ["2/3"]
    assert data["n-samples"][SHARDED_TASK] == {"original": 56, "effective": 19 + 18}
    status, out, err = verify(capsys, tmp_path / "c")
    assert status == 0, err
    assert "37 of 56 documents" in out


@pytest.mark.slow
def test_merge_refuses_a_shard_without_samples_or_with_corrupt_values(shard_runs, tmp_path, capsys):
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    (samples,) = two.rglob("samples_*.jsonl")
    saved = samples.read_bytes()
    samples.unlink()
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "a",
        "shard 2/3",
        "no samples file of dcpmi_cb",
        "--log_samples",
    )
    samples.write_bytes(saved)

    def every_dcpmi_right(lines):
        for line in lines:
            line["acc_dcpmi"] = 1.0

    _edit_samples(two, every_dcpmi_right)
    _refused(capsys, [one, two, three], tmp_path / "b", "acc_dcpmi recomputes to 0", "corrupt")
    samples.write_bytes(saved)
    _edit_samples(two, lambda lines: lines[0].update(acc=250.0))
    _refused(capsys, [one, two, three], tmp_path / "c", ":1: its acc 250.0 is not 0 or 1")
    samples.write_bytes(saved)
    _edit_samples(two, lambda lines: lines[0].update(truncated=250.0))
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "d",
        "doc 1: truncated recomputes to 0 from its requests' token counts",
        "250.0",
        "corrupt",
    )
    samples.write_bytes(saved[: len(saved) // 2])  # a truncated file
    _refused(capsys, [one, two, three], tmp_path / "e", "samples_dcpmi_cb", "shard 2/3")
    samples.write_bytes(saved)
    _edit_samples(two, lambda lines: lines.pop(3))  # a document dropped
    _refused(capsys, [one, two, three], tmp_path / "f", "not this shard's", "(18)")


@pytest.mark.slow
def test_merge_refuses_what_is_not_a_shard_and_an_out_folder_with_results(
    shard_runs, tmp_path, capsys
):
    one, two, three, whole = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3", "whole")
    _refused(capsys, [one, whole], tmp_path / "a", "not a shard", "dcpmi run --shard K/N")
    status, _out, err = merge(capsys, one, two, three, "--out", whole)
    assert status == 2 and "holds results files already" in err


@pytest.mark.slow
def test_shard_results_keep_the_umask_mode(shard_runs):
    (path,) = shard_runs["1of3"].rglob("results_*.json")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


@pytest.mark.api
@pytest.mark.usefixtures("data_dir")
def test_samples_of_a_share_log_their_documents_true_ids_in_every_release():
    # lm-eval 0.5.0.dev1 maps the ids through the --samples list twice (the plugin's
    # start-up hook undoes it: _harness._runs.true_doc_ids_in_logged_samples)
    import lm_eval

    share = Shard(2, 3).indices(56)
    results = lm_eval.simple_evaluate(
        model="dummy", tasks=[SHARDED_TASK], samples={SHARDED_TASK: share}, log_samples=True
    )
    logged = [int(s["doc_id"]) for s in results["samples"][SHARDED_TASK]]
    assert logged == share


# ------------------------------------------------------------------ what a shard's files record


@pytest.mark.slow
def test_merge_refuses_a_forged_shard_beyond_n(shard_runs, tmp_path, capsys):
    """Shard 1/3's samples less their first document are exactly what a shard 4/3 would
    hold (documents 3, 6, ..., 54): given beside 1/3-3/3 it would count 18 documents
    twice. --shard refuses 4/3, and so does merge, whatever the file records."""
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    forged = shutil.copytree(one, tmp_path / "4of3")
    _edit_samples(forged, lambda lines: lines.pop(0))
    _edit_results(forged, _set(("dcpmi", "shard", "index"), 4))
    path, _data = _results(forged)
    _refused(
        capsys,
        [one, two, three, forged],
        tmp_path / "out",
        f"dcpmi merge: {path}: records shard 4/3 (dcpmi.shard), not K/N with 1 <= K <= N; no "
        "run of dcpmi run --shard writes it; the file is edited or forged.",
    )


@pytest.mark.slow
def test_merge_bounds_every_count_a_shard_records_by_the_data(shard_runs, tmp_path, capsys):
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    path, saved = _results(one)
    _edit_results(one, _set(("dcpmi", "shard"), {"index": 0, "count": 0}))  # range(0, n, 0)
    _refused(capsys, [one, two, three], tmp_path / "a", f"{path}: records shard 0/0")
    # N = 10^12 (a list of the missing shards would fill the memory): more than documents
    _edit_results(one, _set(("dcpmi", "shard"), {"index": 1, "count": 10**12}))
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "b",
        f"shard 1/{10**12} ({path}) ({SHARDED_TASK}): a shard of {10**12}, but the split has "
        "56 documents, so some shards would hold none (dcpmi run --shard refuses that); no "
        "run of dcpmi run --shard writes it; the file is edited or forged.",
    )
    # and the split size with it: the task built from the data has 56
    _edit_results(one, _set(("n-samples", SHARDED_TASK, "original"), 10**12))
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "c",
        f"({SHARDED_TASK}): records a split of {10**12} documents (n-samples.{SHARDED_TASK}."
        f"original), but {SHARDED_TASK} built here from the data has 56; the shard is not of "
        "this data (check --data_dir).",
    )
    path.write_text(json.dumps(saved))


@pytest.mark.slow
def test_merge_writes_nothing_outside_out(shard_runs, tmp_path, capsys, monkeypatch):
    one, two, three = _copy(shard_runs, tmp_path, "1of3", "2of3", "3of3")
    path, saved = _results(one)
    before = sorted(tmp_path.rglob("*"))
    # --out inside a shard's folder: that shard would hold a results file that is no shard
    _refused(
        capsys,
        [one, two, three],
        one / "merged",
        f"dcpmi merge: --out {one / 'merged'}: inside the shard folder {one}, where the merged "
        "results file would be read as a shard the next time; give a folder outside the "
        "shards.",
    )
    # a model_name of '..': out/<model> would be out's parent
    for folder in (one, two, three):
        _edit_results(folder, _set(("model_name",), ".."))
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "out",
        f"dcpmi merge: {path}: model_name '..' cannot name a file ('..' is no file's name)",
    )
    path.write_text(json.dumps(saved))
    # a task name that climbs out of the folder
    _edit_results(one, lambda data: data["results"].update(
        {"dcpmi_cb/../../../evil": data["results"][SHARDED_TASK]}))  # fmt: skip
    _edit_results(one, lambda data: data["configs"].update(
        {"dcpmi_cb/../../../evil": data["configs"][SHARDED_TASK]}))  # fmt: skip
    _refused(
        capsys,
        [one, two, three],
        tmp_path / "out",
        f"dcpmi merge: {path}: the task name 'dcpmi_cb/../../../evil' cannot name a file (it "
        "holds '/')",
    )
    path.write_text(json.dumps(saved))
    assert sorted(tmp_path.rglob("*")) == before
    # --out on a read-only file system
    mounted = tmp_path / "mounted"
    read_only_file_system(monkeypatch, mounted)
    status, _out, err = merge(capsys, one, two, three, "--out", mounted)
    model = _results(one)[1]["model_name_sanitized"]
    assert (status, err) == (2, (
        f"dcpmi merge: {mounted / model}: cannot be created (Read-only file system); give a "
        "folder that can be written (nothing was written)\n"
    ))  # fmt: skip
    assert list(mounted.iterdir()) == []


@pytest.mark.fast
@pytest.mark.parametrize("value", ["slurm\n/x", "slurm/x\ny", "kubernetes/\n2"])
def test_a_scheduler_value_with_a_line_break_is_refused_in_one_line(value):
    """The fuzzer's finding: the value was shown as typed, its line break and all."""
    from lm_eval_dcpmi.cli._shard_option import parse_shard

    with pytest.raises(DCPMIError) as refused:
        parse_shard(value, environ={})
    assert "\n" not in str(refused.value)
    assert repr(value.strip()) in str(refused.value)
