"""`dcpmi verify --rescore`: what no recompute can catch, another model's run relabelled.

A tiny random-weight Llama with the embedded model's tokenizer scores CB for real; its
results are then given the embedded model's identity. Every recomputed number agrees (the
same tokenizer counts the same tokens), so plain verify passes; scoring requests again
with the model the results name fails, naming the task, document, request and |dll|. An
honest run passes (conftest.shard_runs' whole CB run).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from helpers import SHARDED_TASK, dcpmi_once, tiny_model

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.verification._rescore import catch_chance, chosen, parse_count


@pytest.mark.fast
def test_the_chance_of_catching_a_forgery_is_hand_computed():
    # 10 documents, 1 forged (10%): drawing 3 misses it with chance 9/10 * 8/9 * 7/8 = 0.7
    assert catch_chance(10, 3, 0.10) == pytest.approx(0.3)
    assert catch_chance(10, 10, 0.01) == 1.0  # every document scored
    # 56 documents, 3 forged (5%, rounded up), 10 drawn: 1 - C(53, 10) / C(56, 10)
    assert catch_chance(56, 10, 0.05) == pytest.approx(1 - math.comb(53, 10) / math.comb(56, 10))


@pytest.mark.fast
def test_the_documents_drawn_depend_on_the_seed_alone():
    import random

    a = chosen(list(range(100)), 5, random.Random(3))
    assert a == chosen(list(range(100)), 5, random.Random(3)) and len(set(a)) == 5
    assert a == sorted(a)
    assert chosen([4, 2], None, random.Random(0)) == [2, 4]
    assert parse_count("all") is None and parse_count("12") == 12
    with pytest.raises(DCPMIError, match="--rescore 'some'"):
        parse_count("some")
    with pytest.raises(DCPMIError, match="--rescore '\u00b2'"):  # isdigit(), not int: ValueError
        parse_count("\u00b2")


@pytest.mark.fast
@pytest.mark.parametrize("tolerance", ["-1", "nan", "inf"])
def test_a_tolerance_that_is_no_bound_is_refused_before_anything_is_read(
    tmp_path, capsys, tolerance
):
    # -1 would fail every request (after the model loaded), NaN and inf would pass every
    # one; the path is not even read (it does not exist: that error would come first)
    status, out, err = verify(capsys, tmp_path / "none", "--rescore", "3", "--tolerance", tolerance)
    assert (status, out) == (2, "")
    assert err == (
        f"dcpmi verify: --tolerance {float(tolerance)!r}: give the largest |loglikelihood "
        "difference| accepted, a number 0 or more in nats (default 0.002).\n"
    )


def verify(capsys, *args) -> tuple[int, str, str]:
    status = cli.main(["verify", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def relabelled(shard_runs, tmp_path_factory) -> Path:
    """The tiny model's genuine CB run, named as the embedded model's."""
    folder = tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama")
    run = dcpmi_once(
        tmp_path_factory,
        "tiny_cb",
        ["--model", "hf", "--model_args", f"pretrained={folder}", "--batch_size", "8",
         "--tasks", SHARDED_TASK, "--model_id", "someone/tiny-llama"],
    )  # fmt: skip
    target = tmp_path_factory.mktemp("relabelled") / "run"
    shutil.copytree(run, target)
    (honest_results,) = shard_runs["whole"].rglob("results_*.json")
    honest = json.loads(honest_results.read_text())
    (path,) = target.rglob("results_*.json")
    data = json.loads(path.read_text())
    for key in ("model_name", "model_name_sanitized", "dcpmi"):
        data[key] = honest[key]
    data["config"]["model_args"] = honest["config"]["model_args"]
    data["configs"][SHARDED_TASK]["metadata"] = honest["configs"][SHARDED_TASK]["metadata"]
    path.write_text(json.dumps(data))
    return target


@pytest.mark.slow
def test_another_models_run_relabelled_passes_a_recompute_and_fails_a_rescore(relabelled, capsys):
    status, out, err = verify(capsys, relabelled)
    assert status == 0, err  # what a recompute cannot see
    status, out, err = verify(capsys, relabelled, "--rescore", "all", "--seed", "1")
    assert status == 1
    lines = [line for line in err.splitlines() if "|dll|" in line]
    assert len(lines) == 5  # five requests named, then how many more
    assert "more requests past the tolerance" in err
    assert f"({SHARDED_TASK}): doc 0: request 0 scores" in lines[0]
    assert (
        "with hf, the embedded HuggingFaceTB/SmolLM2-135M-Instruct, but the samples log" in lines[0]
    )
    assert "rescoring with hf, the embedded HuggingFaceTB/SmolLM2-135M-Instruct, seed 1" in out


@pytest.mark.slow
def test_an_honest_run_passes_a_rescore_and_says_what_it_covered(shard_runs, capsys):
    status, out, err = verify(capsys, shard_runs["whole"], "--rescore", "4", "--seed", "5")
    assert status == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith(f"{SHARDED_TASK}: rescored")]
    assert "rescored 4 of 56 documents" in line and "(tolerance 0.002)" in line
    assert f"10%: {catch_chance(56, 4, 0.10):.2f}" in line
    assert "and the drawn documents rescored within the tolerance" in out
