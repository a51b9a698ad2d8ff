"""``dcpmi run``'s own options, taken out of the command line in one pass
(``cli/_run_options.py``); each option's own refusals are tested beside what it does
(test_cli, test_quick_look, test_shards)."""

from __future__ import annotations

import pytest

from lm_eval_dcpmi.cli._run_options import RunOptions, refuse_combinations, split_run_options
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.task._shards import Shard

pytestmark = pytest.mark.fast

SLURM = {
    "SLURM_ARRAY_TASK_ID": "2",
    "SLURM_ARRAY_TASK_MIN": "1",
    "SLURM_ARRAY_TASK_MAX": "3",
    "SLURM_ARRAY_TASK_COUNT": "3",
    "SLURM_ARRAY_TASK_STEP": "1",
}


def test_the_four_options_come_out_in_one_pass_and_lm_evals_stay_in_order():
    argv = ["--model", "hf", "--dcpmi_task", "piqa=Answer:", "--limit", "2",
            "--model_id=org/model", "--quick", "5", "--log_samples", "--shard", "slurm",
            "--dcpmi_task=sciq", "--output_path", "out"]  # fmt: skip
    options, rest = split_run_options(argv, environ=SLURM)
    assert options == RunOptions(
        dcpmi_tasks=(("piqa", "Answer:"), ("sciq", None)),
        model_id="org/model",
        quick=5,
        shard=Shard(2, 3),
    )
    assert options.shard.source == "SLURM_ARRAY_TASK_ID=2 of the array 1-3 (3 tasks)"
    assert rest == ["--model", "hf", "--limit", "2", "--log_samples", "--output_path", "out"]
    assert split_run_options([]) == (RunOptions(), [])
    # lm-eval's own options that merely start alike are lm-eval's
    assert split_run_options(["--quickly", "--model_idx=1"]) == (
        RunOptions(),
        ["--quickly", "--model_idx=1"],
    )


def test_model_id_given_twice_is_the_last_one():
    options, _rest = split_run_options(["--model_id", "org/a", "--model_id=org/b"])
    assert options.model_id == "org/b"
    with pytest.raises(DCPMIError, match="not-an-id"):
        split_run_options(["--model_id", "not-an-id"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model_id"], "--model_id needs a value: the model's hub id, ORG/NAME."),
        (["--model_id", "--dcpmi_task", "piqa"], "--model_id needs a value"),
        (["--dcpmi_task", "--quick", "5"], "--dcpmi_task needs a value TASK or TASK=PREMISE."),
        (["--quick", "--shard", "1/2"], "--quick '': expected a whole number of documents"),
        (["--shard"], "--shard '': give K/N, shard K of N"),
    ],
)
def test_a_missing_value_is_named_not_taken_from_the_next_option(argv, message):
    with pytest.raises(DCPMIError) as refused:
        split_run_options(argv)
    assert str(refused.value).startswith(message)


def test_shard_and_quick_pick_their_own_documents():
    refuse_combinations(RunOptions(quick=5), limit=None, samples=None)
    refuse_combinations(RunOptions(shard=Shard(1, 2)), limit=None, samples=None)
    cases = [
        (RunOptions(shard=Shard(1, 2), quick=5), None, None, "--shard 1/2 scores every 2th "
         "document of each task and cannot be combined with --quick; drop one of the two."),
        (RunOptions(shard=Shard(1, 2)), None, {"t": [1]}, "cannot be combined with --samples"),
        (RunOptions(quick=5), 3.0, None, "--quick 5 picks 5 documents evenly spread over each "
         "task's split and cannot be combined with --limit; drop one of the two."),
    ]  # fmt: skip
    for options, limit, samples, message in cases:
        with pytest.raises(DCPMIError) as refused:
            refuse_combinations(options, limit, samples)
        assert message in str(refused.value)
