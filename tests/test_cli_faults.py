"""`dcpmi run` faults: --samples picks the tasks, --dcpmi_task names are checked, the checks
run before any model, and nothing is left behind (SIGTERM included). Most run `dcpmi run`
in this process up to its checks (they fail before lm-eval starts); the SIGTERM test kills
a real `dcpmi run`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from helpers import (
    DCPMI,
    LM_EVAL_05,
    QUIZ_TEST,
    assert_one_line_error,
    embedded_model_args,
    lm_eval_tasks,
    run_dcpmi,
    unknown_task_words,
    write_quiz,
)

from lm_eval_dcpmi import cli
from lm_eval_dcpmi.cli import _lm_eval_options as lm_eval_options
from lm_eval_dcpmi.cli import _run_steps as run_steps
from lm_eval_dcpmi.cli._run_options import split_run_options
from lm_eval_dcpmi.errors import DCPMIError

MODEL = ["--model", "hf", "--model_args", "pretrained=x", "--device", "cpu"]


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """The temporary folder `dcpmi run` makes its own in (checked empty afterwards)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def run_in_process(capsys, *args: str) -> tuple[int, str]:
    status = cli.main(["run", *args])
    return status, capsys.readouterr().err


# ------------------------------------------------------------------ --samples picks the tasks


@pytest.mark.fast
def test_samples_without_tasks_runs_the_tasks_it_names(tmp_path):
    samples = '{"dcpmi_copa": [0, 5, 7], "dcpmi_cb": [1]}'
    assert lm_eval_tasks(lm_eval_options.lm_eval_argv([*MODEL, "--samples", samples])) == [
        "dcpmi_copa",
        "dcpmi_cb",
    ]  # not the whole dcpmi group
    path = tmp_path / "samples.json"
    path.write_text('{"dcpmi_sst2": [3]}')
    assert lm_eval_tasks(lm_eval_options.lm_eval_argv([*MODEL, "-E", str(path)])) == ["dcpmi_sst2"]
    with_variant = lm_eval_options.lm_eval_argv([*MODEL, "--samples", samples], ["quiz_dcpmi"])
    assert lm_eval_tasks(with_variant) == ["dcpmi_copa", "dcpmi_cb", "quiz_dcpmi"]
    explicit = lm_eval_options.lm_eval_argv([*MODEL, "--tasks", "dcpmi_rte", "--samples", samples])
    assert lm_eval_tasks(explicit) == ["dcpmi_rte"]  # the user's --tasks stay


@pytest.mark.fast
def test_dcpmi_run_alone_runs_the_dcpmi_group_on_the_embedded_model():
    argv = lm_eval_options.lm_eval_argv([])
    settings = lm_eval_options.config(argv[1:])
    assert (settings.model, settings.tasks, settings.batch_size) == ("hf", ["dcpmi"], "8")
    assert settings.model_args == embedded_model_args()


@pytest.mark.fast
def test_config_yaml_settings_are_not_overridden_by_defaults(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"tasks": ["dcpmi_copa"], "batch_size": 2, "device": "x"}))
    argv = lm_eval_options.lm_eval_argv(["--config", str(config), *MODEL[:4]])
    assert "--tasks" not in argv and "--batch_size" not in argv and "--device" not in argv
    settings = lm_eval_options.config(argv[1:])
    assert (settings.tasks, settings.batch_size, settings.device) == (["dcpmi_copa"], 2, "x")
    with_variant = lm_eval_options.config(
        lm_eval_options.lm_eval_argv(["--config", str(config)], ["q"])[1:]
    )
    assert with_variant.tasks == ["dcpmi_copa", "q"]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nosuch.json", "--samples 'nosuch.json': neither a JSON object nor a file"),
        ('{"dcpmi_copa": [0, -1]}', "expected a JSON object of task names and lists of doc"),
        ('{"dcpmi_copa": 3}', "expected a JSON object of task names and lists of document"),
    ],
)
def test_bad_samples_option(value, message):
    with pytest.raises(DCPMIError, match=message):
        lm_eval_options.lm_eval_argv([*MODEL, "--samples", value])


@pytest.mark.fast
def test_samples_file_with_bad_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "samples.json"
    path.write_text('{"dcpmi_copa": [0, 1],\n "dcpmi_cb": [2,, 3]}\n')
    with pytest.raises(DCPMIError) as caught:
        lm_eval_options.lm_eval_argv([*MODEL, "--samples", str(path)])
    assert str(caught.value).startswith(
        f"--samples {path}:2: not valid JSON at column 17 (Expecting value)"
    )


@pytest.mark.fast
def test_samples_checked_against_the_tasks_run(capsys):
    sizes = {"dcpmi_copa": 500, "dcpmi_cb": 56}
    with pytest.raises(
        DCPMIError,
        match=r"names 'dcpmi_cpa', which is not a task this run "
        r"evaluates \(tasks: dcpmi_copa, dcpmi_cb\).*Did you mean: dcpmi_copa, dcpmi_cb\?",
    ):
        run_steps.check_samples({"dcpmi_cpa": [0]}, sizes)  # fmt: skip
    with pytest.raises(DCPMIError, match="names 'dcpmi', which is not a task"):
        run_steps.check_samples({"dcpmi": [0]}, sizes)  # a group: lm-eval would ignore it
    with pytest.raises(DCPMIError, match=r"dcpmi_cb has 56 documents \(indices 0-55\); 56 is"):
        run_steps.check_samples({"dcpmi_cb": [3, 56]}, sizes)
    run_steps.check_samples({"dcpmi_copa": [0, 499]}, sizes)
    assert capsys.readouterr().err == (
        "dcpmi: warning: --samples gives no documents for 1 task(s) (dcpmi_cb); lm-eval "
        "evaluates them in full.\n"
    )


@pytest.mark.usefixtures("data_dir")
def test_samples_naming_a_task_not_run_stops_dcpmi_run(capsys, scratch):
    status, err = run_in_process(
        capsys, "--tasks", "dcpmi_copa", "--samples", '{"dcpmi_cpoa": [0]}'
    )
    assert status == 2
    assert err.startswith("dcpmi: --samples names 'dcpmi_cpoa', which is not a task this run")
    assert "Did you mean: dcpmi_copa?" in err and len(err.splitlines()) == 1
    assert list(scratch.iterdir()) == []


# ------------------------------------------------------------------ --dcpmi_task names


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("../../x=Answer:", "it holds '/'"),
        ("a/b=Answer:", "it holds '/'"),
        ("a\\b=Answer:", "it holds '\\\\'"),
        ("..=Answer:", "it starts with '.'"),
        (".hidden=Answer:", "it starts with '.'"),
        ("a\nb=Answer:", "it holds '\\n'"),
    ],
)
def test_task_names_that_are_paths_are_refused(value, why):
    with pytest.raises(DCPMIError) as caught:
        split_run_options(["--dcpmi_task", value])
    base = value.partition("=")[0]
    assert str(caught.value).startswith(
        f"--dcpmi_task {value!r}: {base!r} is not a task name ({why}); TASK is the name of a "
        "registered task"
    )


@pytest.mark.fast
def test_task_names_with_parentheses_are_task_names():
    # lm-eval registers e.g. tmmluplus_education_(profession_level)
    options, _rest = split_run_options(["--dcpmi_task", "a_(b)=X"])
    assert options.dcpmi_tasks == (("a_(b)", "X"),)


@pytest.mark.fast
def test_path_as_task_writes_nothing_outside_the_temporary_folder(capsys, scratch, tmp_path):
    status, err = run_in_process(capsys, "--dcpmi_task", "../../x=Answer:", "--limit", "2")
    assert status == 2 and err.startswith("dcpmi: --dcpmi_task '../../x=Answer:': '../../x' is")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [Path("tmp")]


def test_unknown_task_suggests_registered_names_only(capsys, scratch):
    status, err = run_in_process(capsys, "--dcpmi_task", "nosuch=Answer:", "--limit", "2")
    assert status == 2
    assert err == (
        "dcpmi: --dcpmi_task 'nosuch=Answer:': 'nosuch' is not a registered task (searched "
        "lm-eval's tasks, the plugin's and --include_path). A task of your own needs its "
        "folder in --include_path.\n"
    )  # no "Did you mean: nosuch_dcpmi", the variant this run wrote
    assert list(scratch.iterdir()) == []


@pytest.mark.fast
def test_check_base_tasks_never_suggests_the_variant():
    with pytest.raises(DCPMIError) as caught:
        run_steps.check_base_tasks(["arc_easy", "arc_esy_dcpmi"], [("arc_esy", "A:")])
    assert "Did you mean: arc_easy?" in str(caught.value)
    assert "arc_esy_dcpmi" not in str(caught.value)


@pytest.mark.fast
@pytest.mark.parametrize("option", ["--metadata", "--samples", "--model_args"])
def test_bad_json_in_an_option_is_one_line_with_its_position(option):
    # The same message under every lm-eval release (0.4.12 exits through argparse for
    # --metadata; 0.4.13 drops the position).
    with pytest.raises(DCPMIError) as caught:
        lm_eval_options.lm_eval_argv([option, '{"a": 1,}', "--tasks", "dcpmi_copa"])
    assert str(caught.value) == (
        f"{option} '{{\"a\": 1,}}': not valid JSON at column 9 (Expecting property name enclosed "
        "in double quotes); write a JSON object with double-quoted names and strings"
    )


def test_lm_evals_option_errors_are_one_line(capsys, scratch):
    status, err = run_in_process(capsys, "--tasks", "dcpmi_copa", "--log_samples")
    assert (status, err) == (
        2,
        "dcpmi: lm-eval: Specify --output_path if providing --log_samples or --predict_only\n",
    )
    # each release's own words: 0.4 names every unknown task, 0.5 the first
    status, err = run_in_process(capsys, "--tasks", "dcpmi_copaa")
    assert (status, err) == (
        2,
        f"dcpmi: lm-eval: {unknown_task_words('dcpmi_copaa')}. Did you mean: dcpmi_copa? "
        "`dcpmi tasks` lists the plugin's tasks, `lm_eval ls tasks` every registered one; a "
        "folder of your own joins them with --include_path.\n",
    )
    status, err = run_in_process(capsys, "--tasks", "dcpmi_sts2,arc_esy,zzzz")
    if LM_EVAL_05:
        assert err.startswith(
            f"dcpmi: lm-eval: {unknown_task_words('dcpmi_sts2')}. Did you mean: dcpmi_sst2? "
        )
    else:
        assert err.startswith(
            "dcpmi: lm-eval: Tasks not found: dcpmi_sts2, arc_esy, zzzz. Did you mean: "
            "dcpmi_sst2 for dcpmi_sts2; arc_easy for arc_esy? `dcpmi tasks`"
        )


# ------------------------------------------------------------------ before the model, cleanly


def write_bad_quiz(folder: Path) -> Path:
    """The user's quiz task and its by-name variant, over data whose document 1 has a
    target that is no option."""
    write_quiz(folder, by_name=True)
    rows = [*QUIZ_TEST[:1], {**QUIZ_TEST[1], "label": 7}]
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_bad_document_stops_dcpmi_run_before_the_model(tmp_path):
    folder = write_bad_quiz(tmp_path / "tasks")
    # A model that cannot load (its traceback would come first if it were built), and the
    # embedded model's tokenizer for the checks (metadata wins over the model arguments).
    model = ["--model", "hf", "--model_args", f"pretrained={tmp_path}/no_model",
             "--metadata", json.dumps(embedded_model_args())]  # fmt: skip
    completed = run_dcpmi(
        [*model, "--include_path", str(folder), "--tasks", "quiz_dcpmi"], TMPDIR=str(tmp_path)
    )
    assert_one_line_error(
        completed, f"task quiz_dcpmi ({folder}/quiz_dcpmi.yaml), document 1",
        "target 7 is not an option index in 0..2",
    )  # fmt: skip
    assert not list(tmp_path.glob("dcpmi_*"))


@pytest.mark.parametrize("delay", [0.0, 4.0])  # in the start, then in lm-eval's task loading
def test_sigterm_removes_the_temporary_folder(tmp_path, delay):
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen(
        [DCPMI, "run", "--include_path", str(folder), "--dcpmi_task", "quiz=A:"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    deadline = time.monotonic() + 120
    while not list(scratch.glob("dcpmi_*/**/quiz_dcpmi.yaml")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    time.sleep(delay)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err[-3000:]
    assert err.endswith("dcpmi: stopped by SIGTERM; temporary files removed.\n")
    assert list(scratch.glob("dcpmi_*")) == []
