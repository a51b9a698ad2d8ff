"""`dcpmi run`: --dcpmi_task TASK=PREMISE, one-line errors, and DC-PMI by name on a task
that is not the plugin's (a local-data task written here), beside the base task."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import embedded_model_args_string

from lm_eval_dcpmi.command import cli, derived_tasks, lm_eval_options
from lm_eval_dcpmi.core.scoring import ACCURACIES
from lm_eval_dcpmi.errors import DCPMIError

DCPMI = str(Path(sys.executable).with_name("dcpmi"))
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))

# ------------------------------------------------------------------ parsing the option


def test_dcpmi_task_options_are_taken_out_of_lm_evals_options():
    derived, rest = derived_tasks.split_dcpmi_tasks(
        ["--tasks", "piqa", "--dcpmi_task", "arc_easy=Answer:", "--limit", "2",
         "--dcpmi_task=hellaswag={{ query.split()[-1] }}", "--dcpmi_task", "quiz= a=b "]
    )  # fmt: skip
    assert derived == [
        ("arc_easy", "Answer:"),
        ("hellaswag", "{{ query.split()[-1] }}"),
        ("quiz", " a=b "),  # the premise is kept verbatim, spaces and '=' included
    ]
    assert rest == ["--tasks", "piqa", "--limit", "2"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dcpmi_task", "arc_easy"], "--dcpmi_task 'arc_easy': expected TASK=PREMISE"),
        (["--dcpmi_task", "arc_easy="], "non-empty domain premise"),
        (["--dcpmi_task", "=Answer:"], "expected TASK=PREMISE"),
        (["--limit", "2", "--dcpmi_task"], "--dcpmi_task needs a value TASK=PREMISE"),
        (["--dcpmi_task", "piqa=A", "--dcpmi_task=piqa=B"], "names piqa more than once"),
    ],
)
def test_bad_dcpmi_task_options(argv, message):
    with pytest.raises(DCPMIError, match=message):
        derived_tasks.split_dcpmi_tasks(argv)


def test_bad_option_is_one_line_and_status_2(capsys):
    assert cli.main(["run", "--dcpmi_task", "arc_easy"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "dcpmi: --dcpmi_task 'arc_easy': expected TASK=PREMISE with a registered multiple-choice "
        'task and a non-empty domain premise, e.g. arc_easy="Answer:".\n'
    )


def test_derived_yaml_is_the_by_name_form(tmp_path):
    from lm_eval.tasks._yaml_loader import load_yaml

    from lm_eval_dcpmi.core.task import DCPMITask

    names = derived_tasks.write_derived_tasks(
        [("arc_easy", "Answer:"), ("copa", "\n{{ x }}")], tmp_path
    )
    assert names == ["arc_easy_dcpmi", "copa_dcpmi"]
    assert load_yaml(tmp_path / "copa_dcpmi.yaml", resolve_func=True) == {
        "task": "copa_dcpmi",
        "base_task": "copa",
        "domain_premise": "\n{{ x }}",
        "class": DCPMITask,
    }


def lm_eval_tasks(argv: list[str]) -> list[str]:
    """The task list lm-eval's own parser makes of a `dcpmi run` command line."""
    from lm_eval._cli.harness import HarnessCLI

    return HarnessCLI()._parser.parse_args(argv[1:]).tasks


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


def test_help_documents_the_option(capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dcpmi_task TASK=PREMISE" in out
    assert 'dcpmi run --tasks arc_easy --dcpmi_task arc_easy="Answer:"' in out


# ------------------------------------------------------------------ errors before the model


def run_dcpmi(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DCPMI, "run", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )


def assert_one_line_error(completed: subprocess.CompletedProcess, *parts: str) -> None:
    """Exit status 2, one `dcpmi:` line naming ``parts``, no traceback, model never loaded."""
    assert completed.returncode == 2, completed.stderr[-3000:]
    lines = [line for line in completed.stderr.splitlines() if line.startswith("dcpmi:")]
    assert len(lines) == 1, completed.stderr[-3000:]
    assert completed.stderr.rstrip().endswith(lines[0])
    for part in parts:
        assert part in lines[0]
    assert "Traceback" not in completed.stderr
    assert "Initializing hf model" not in completed.stderr  # failed before loading the model


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

QUIZ_TEST = [
    {"question": "What colour is fresh snow?", "choices": ["white", "black", "green"], "label": 0},
    {"question": "Which animal barks?", "choices": ["a cat", "a dog", "a fish"], "label": 1},
    {"question": "How many legs has a spider?", "choices": ["six", "four", "eight"], "label": 2},
]
QUIZ_TRAIN = [
    {"question": "What do bees make?", "choices": ["honey", "milk", "silk"], "label": 0},
]
DESCRIPTION = "A general knowledge quiz.\n\n"
# The user's existing task, with its own prompt, options, delimiter, description,
# few-shot split and metrics (acc_norm and brier_score included).
QUIZ_YAML = {
    "task": "quiz",
    "dataset_path": "json",
    "test_split": "test",
    "fewshot_split": "train",
    "output_type": "multiple_choice",
    "description": DESCRIPTION,
    "doc_to_text": "Q: {{question}}\nA:",
    "doc_to_choice": "{{choices}}",
    "doc_to_target": "label",
    "target_delimiter": " => ",
    "metric_list": [
        {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        {"metric": "brier_score", "aggregation": "brier_score", "higher_is_better": False},
    ],
    "metadata": {"version": 1},
}
PREMISE = "A:"
BY_NAME_YAML = f"""\
task: quiz_dcpmi
base_task: quiz
class: !function lm_eval_dcpmi.task.DCPMITask
domain_premise: "{PREMISE}"
"""
KEPT = ("acc", "acc_norm", "brier_score")


def write_quiz(folder: Path, by_name: bool) -> Path:
    """The user's task folder: data, quiz.yaml and (``by_name``) the by-name variant."""
    folder.mkdir()
    files = {}
    for split, rows in (("test", QUIZ_TEST), ("train", QUIZ_TRAIN)):
        files[split] = str(folder / f"{split}.jsonl")
        Path(files[split]).write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {**QUIZ_YAML, "dataset_kwargs": {"data_files": files}}
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if by_name:
        (folder / "quiz_dcpmi.yaml").write_text(BY_NAME_YAML)
    return folder


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


def test_hf_prefix_alone_takes_the_embedded_model():
    from lm_eval_dcpmi.command.lm_eval_options import embedded_model_args, lm_eval_argv

    argv = lm_eval_argv(["--model", "hf-prefix", "--tasks", "dcpmi_copa"])
    assert argv[argv.index("--model_args") + 1] == embedded_model_args()
    assert "--model_args" not in lm_eval_argv(["--model", "vllm", "--tasks", "dcpmi_copa"])
