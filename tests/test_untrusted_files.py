"""A submitted file is data: no text in a results or samples file runs code on the machine
of whoever verifies, merges or exports it.

Every payload here would write a marker file if it ran (a Jinja template reaching Python's
``os``, a tokenizer's remote code); each test asserts that no marker is written, and that
the command refuses the file instead of passing it. The runs are two shards of a
``--dcpmi_task`` variant of a task of the user's own (``helpers.write_quiz``), scored by a
tiny random-weight model, offline.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import tiny_model, write_quiz

from lm_eval_dcpmi import cli

TASK = "quiz_dcpmi"


def template_payload(marker: Path) -> str:
    """A Jinja template that writes ``marker`` when rendered by an unsandboxed environment
    (lm-eval's own renders every task template so)."""
    return f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}"


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, Path]:
    """``dcpmi run --dcpmi_task quiz --shard K/2 --log_samples`` for K = 1, 2 (a tiny
    random-weight model): the task folder, the model and the two output folders."""
    root = tmp_path_factory.mktemp("untrusted")
    folder = write_quiz(root / "tasks", by_name=False)
    config = yaml.safe_load((folder / "quiz.yaml").read_text())
    config["metric_list"] = config["metric_list"][:2]  # merge aggregates the plugin's metrics
    (folder / "quiz.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    model = tiny_model(root / "model")
    made = {"tasks": folder, "model": model}
    for k in (1, 2):
        output = root / f"shard{k}"
        status = cli.main(
            ["run", "--model", "hf", "--model_args", f"pretrained={model}",
             "--include_path", str(folder), "--dcpmi_task", "quiz", "--shard", f"{k}/2",
             "--log_samples", "--output_path", str(output)]
        )  # fmt: skip
        assert status == 0
        made[f"shard{k}"] = output
    return made


def forged_copy(shards: dict[str, Path], target: Path, edit) -> list[Path]:
    """Both shards copied under ``target``, each results file changed by ``edit(data)``."""
    copies = []
    for k in (1, 2):
        copy = target / f"shard{k}"
        shutil.copytree(shards[f"shard{k}"], copy)
        (path,) = copy.rglob("results_*.json")
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
        copies.append(copy)
    return copies


def command(name: str, folders: list[Path], shards: dict[str, Path], out: Path) -> list[str]:
    """``dcpmi verify``, ``merge`` or ``export`` of ``folders``, as a leaderboard runs it."""
    include = ["--include_path", str(shards["tasks"]), "--tokenizer", str(shards["model"])]
    if name == "verify":
        return ["verify", str(folders[0]), *include]
    if name == "merge":
        return ["merge", *map(str, folders), "--out", str(out), *include]
    return ["export", str(folders[0]), "--format", "eee", "--out", str(out), "--allow-partial",
            "--allow-other-version", "--model_id", "someone/tiny", *include]  # fmt: skip


def run(capsys, argv: list[str]) -> tuple[int, str]:
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["verify", "merge", "export"])
def test_the_genuine_shards_pass(shards, name, tmp_path, capsys):
    folders = [shards["shard1"], shards["shard2"]]
    status, out = run(capsys, command(name, folders, shards, tmp_path / "out"))
    assert status == 0, out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["verify", "merge", "export"])
def test_a_template_in_the_recorded_premise_option_never_runs(shards, name, tmp_path, capsys):
    """The probe's payload: the recorded ``--dcpmi_task`` option, from which each tool
    builds the variant again, with a premise that reaches ``os.system``."""
    marker = tmp_path / "ran"
    option = f"quiz={template_payload(marker)} A:"

    def edit(data):
        data["configs"][TASK]["metadata"]["dcpmi_task"] = option

    folders = forged_copy(shards, tmp_path / "forged", edit)
    status, out = run(capsys, command(name, folders, shards, tmp_path / "out"))
    assert not marker.exists()
    assert status != 0, out
    assert "SecurityError" in out and "access to attribute '__init__'" in out, out
    assert not (tmp_path / "out").exists() or name == "verify"


# Each recorded string a tool reads, and how to put a payload there.
RECORDED_STRINGS = {
    "metadata.domain_premise": lambda d, p: d["configs"][TASK]["metadata"].update(domain_premise=p),
    "metadata.config_source": lambda d, p: d["configs"][TASK]["metadata"].update(config_source=p),
    "configs.doc_to_text": lambda d, p: d["configs"][TASK].update(doc_to_text=p),
    "configs.doc_to_choice": lambda d, p: d["configs"][TASK].update(doc_to_choice=p),
    "configs.class": lambda d, p: d["configs"][TASK].update({"class": f"!function {p}"}),
    "system_instruction": lambda d, p: d.update(system_instruction=p),
    "chat_template": lambda d, p: d.update(chat_template=p, chat_template_sha="0" * 64),
    "model_args": lambda d, p: d["config"].update(model_args=f"{d['config']['model_args']},x={p}"),
    "task name": lambda d, p: d["versions"].update({p: "1"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("field", sorted(RECORDED_STRINGS))
def test_a_template_in_any_recorded_string_never_runs(shards, field, tmp_path, capsys):
    marker = tmp_path / "ran"
    folders = forged_copy(
        shards, tmp_path / "forged", lambda d: RECORDED_STRINGS[field](d, template_payload(marker))
    )
    for name in ("verify", "export"):
        run(capsys, command(name, folders, shards, tmp_path / name))
        assert not marker.exists(), (field, name)


@pytest.mark.slow
def test_a_tokenizers_remote_code_named_by_the_results_never_runs(shards, tmp_path, capsys):
    """``trust_remote_code=True`` in the recorded model arguments, and a tokenizer folder
    whose ``auto_map`` names code that writes a marker when imported: verify loads the
    tokenizer without remote code (a submitted file cannot ask for it)."""
    marker = tmp_path / "ran"
    evil = tmp_path / "evil_tokenizer"
    shutil.copytree(shards["model"], evil)
    config_path = evil / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    config_path.write_text(json.dumps(config))
    (evil / "evil.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"
        "from transformers import PreTrainedTokenizerFast as EvilTokenizer\n"
    )

    def edit(data):
        data["config"]["model_args"] = f"pretrained={evil},trust_remote_code=True"

    folders = forged_copy(shards, tmp_path / "forged", edit)
    for name in ("verify", "merge", "export"):
        run(capsys, command(name, folders, shards, tmp_path / name))
        assert not marker.exists(), name


@pytest.mark.slow
def test_export_of_a_derived_run_of_ones_own_task_takes_include_path(shards, tmp_path, capsys):
    """verify's --include_path, given to export, rebuilds the variant of the user's task
    (without it: one line naming the option, not a data file)."""
    out = tmp_path / "out"
    status, text = run(capsys, command("export", [shards["shard1"]], shards, out))
    assert status == 0, text
    (record,) = out.rglob("*.json")
    assert TASK in record.read_text()
    argv = command("export", [shards["shard1"]], shards, tmp_path / "without")
    cut = argv.index("--include_path")
    status, text = run(capsys, argv[:cut] + argv[cut + 2 :])
    assert status == 2
    assert (
        f"({TASK}): cannot be built again here: task {TASK} (dcpmi run --dcpmi_task 'quiz'): "
        "base task 'quiz' is not a registered task"
    ) in text
    assert "A task of your own needs its folder in --include_path." in text
    assert "data file" not in text


@pytest.mark.slow
def test_verify_compares_a_derived_tasks_version_with_the_task_it_rebuilt(shards, tmp_path, capsys):
    def edit(data):
        data["versions"][TASK] = "1+premise.00000000"

    built = json.loads(next(shards["shard1"].rglob("results_*.json")).read_text())["versions"]
    folders = forged_copy(shards, tmp_path / "forged", edit)
    status, out = run(capsys, command("verify", folders, shards, tmp_path / "out"))
    assert status == 1
    assert (
        f"({TASK}): its versions entry records version '1+premise.00000000', but the task "
        f"built here is version {built[TASK]!r} (DC-PMI (last-word premise))"
    ) in out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["verify", "merge", "export"])
def test_a_padded_gzip_of_samples_is_refused_not_read_into_memory(shards, name, tmp_path, capsys):
    """The probe's case: the genuine samples gzipped with a line of spaces over the
    64 MiB limit after them (the probe's 6 GiB ended in MemoryError)."""
    folders = forged_copy(shards, tmp_path / "forged", lambda data: None)
    for folder in folders:
        (samples,) = folder.rglob("samples_*.jsonl")
        with gzip.open(samples.with_suffix(".jsonl.gz"), "wb", compresslevel=1) as file:
            file.write(samples.read_bytes())
            file.write(b" " * (64 * 2**20 + 1))
        samples.unlink()
    status, out = run(capsys, command(name, folders, shards, tmp_path / "out"))
    assert status != 0 and "Traceback" not in out and "MemoryError" not in out
    assert re.search(r"\.jsonl\.gz:\d: a line longer than 64 MiB \(far above any lm-eval", out)


# ------------------------------------------------------------------ each path, in one step


@pytest.mark.fast
def test_premises_render_in_a_sandbox_with_lm_evals_filters(tmp_path):
    from lm_eval_dcpmi._harness import jinja_env
    from lm_eval_dcpmi.task._rendering import compile_premise

    marker = tmp_path / "ran"
    for payload in (template_payload(marker), "{{ ''.__class__.__mro__[1].__subclasses__() }}"):
        with pytest.raises(Exception) as refused:
            compile_premise(payload, "t", "t.yaml").render(question="q")
        assert type(refused.value).__name__ == "SecurityError"
    assert not marker.exists()
    # what a task's premise needs renders as in lm-eval's own environment
    doc = {"question": "Is snow white?", "choices": ["yes", "no"], "n": 3}
    for template in (
        " the answer is:",
        "{{ question.split()[-1] }}",
        "{{ question | regex_replace('snow', 'ice') }} {{ choices | join(', ') }}",
        "{{ choices | map('affix', '[', ']') | join }}{% if n > 2 %} many{% endif %}",
        "{{ '%s!' % question }} {{ n * 2 }} {{ 2 ** n }} {{ 'ab' * n }}",
    ):
        sandboxed = compile_premise(template, "t", "t.yaml").render(**doc)
        assert sandboxed == jinja_env().from_string(template).render(**doc)


@pytest.mark.fast
@pytest.mark.parametrize(
    "template", ["{{ 9 ** (9 ** 9) }}", "{{ 'x' * 10 ** 9 }}", "{{ [0] * 10 ** 8 }}"]
)
def test_a_premise_that_would_build_a_huge_number_or_text_is_refused_at_once(template):
    import signal

    from lm_eval_dcpmi.task._rendering import compile_premise

    signal.alarm(10)  # Jinja folds constants while compiling: unbounded, this hangs
    try:
        with pytest.raises(Exception) as refused:
            compile_premise(template, "t", "t.yaml").render()
    finally:
        signal.alarm(0)
    assert type(refused.value).__name__ == "SecurityError"


def submission_recording(model_args: str) -> object:
    from lm_eval_dcpmi._identity import identify
    from lm_eval_dcpmi.verification import Submission

    data = {"config": {"model": "hf", "model_args": model_args}, "results": {}}
    return Submission(Path("r.json"), data, identify({}), {}, {})


@pytest.mark.fast
def test_verify_takes_only_the_tokenizers_name_and_flags_from_the_recorded_model_args():
    submission = submission_recording(
        "pretrained=org/model,revision=abc,trust_remote_code=True,data_dir=/etc,"
        "add_bos_token=True,max_length=64,cache_dir=/tmp/x,parallelize=True"
    )
    assert submission.tokenizer_args(None) == {
        "pretrained": "org/model", "revision": "abc", "add_bos_token": "True", "max_length": "64",
    }  # fmt: skip
    # a tokenizer named on the command line: that one, with the run's counting flags only
    assert submission.tokenizer_args("mine/tok") == {
        "add_bos_token": "True", "max_length": "64", "pretrained": "mine/tok",
        "tokenizer": "mine/tok",
    }  # fmt: skip


@pytest.mark.fast
@pytest.mark.parametrize("model", ["local-completions", "openai-completions", "my_model_class"])
def test_rescore_never_loads_a_served_or_unknown_model_a_file_names(model):
    from lm_eval_dcpmi.errors import DCPMIError
    from lm_eval_dcpmi.verification._rescore import RescoreOptions, model_to_load

    submission = submission_recording("base_url=https://example.invalid/v1,model=org/model")
    submission.data["config"]["model"] = model
    with pytest.raises(DCPMIError) as refused:
        model_to_load(submission, RescoreOptions(count=1, seed=0))
    assert str(refused.value) == (
        f"r.json: the run's model is lm-eval's {model!r}, which --rescore does not load from a "
        "submitted file (only hf, hf-prefix, huggingface); give --model and --model_args of "
        "the model the results name."
    )


@pytest.mark.fast
@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.jsonl", "a/../../b", "a\\b", ""])
def test_a_recorded_data_file_outside_the_data_folder_is_never_read(name, tmp_path):
    from lm_eval_dcpmi.verification import TaskEntry
    from lm_eval_dcpmi.verification._against_data import recorded_digest_findings

    task = TaskEntry(name="t", is_group=False, values={}, stderr={})
    task.config = {"metadata": {"data_files": {name: "0" * 64}}}
    (finding,) = recorded_digest_findings(task, str(tmp_path), "r.json (t)")
    assert str(finding) == (
        f"r.json (t): data file {name!r}: not a file of the data folder (an absolute path, or "
        "one that leads out of it); no run records such a name"
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("evil.yaml", "not a task installed here"),  # lm-eval would load it as a path
        ("mmlu", "a group here, not one task"),
        ("arc_easy", "the task installed here is no DC-PMI task"),
    ],
)
def test_a_task_name_from_a_file_is_built_only_when_it_is_an_installed_dcpmi_task(
    name, problem, tmp_path, monkeypatch
):
    from lm_eval_dcpmi.errors import DCPMIError
    from lm_eval_dcpmi.verification._rebuild import built_task

    marker = tmp_path / "ran"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.yaml").write_text(
        yaml.safe_dump(
            {
                "task": "evil",
                "dataset_path": "json",
                "output_type": "multiple_choice",
                "dataset_kwargs": {"data_files": {"test": "x.jsonl"}},
                "test_split": "test",
                "doc_to_text": template_payload(marker),
                "doc_to_choice": "{{ c }}",
                "doc_to_target": 0,
            }  # fmt: skip
        )
    )
    (tmp_path / "x.jsonl").write_text('{"c": ["a", "b"]}\n')
    with pytest.raises(DCPMIError) as refused:
        built_task(name, {}, None, ())
    assert str(refused.value).startswith(f"{name}: {problem}")
    assert not marker.exists()


@pytest.mark.fast
def test_a_folder_a_results_file_names_is_never_read_or_hashed(tmp_path):
    """A plain lm-eval results file names its model by a path: on the verifier's machine
    that path is someone else's, or a probe of this one (``pretrained=/etc,gguf_file=
    shadow`` would print the file's digest). Nothing in it is read."""
    from lm_eval_dcpmi._identity import identify
    from lm_eval_dcpmi.verification import read_submission

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "org/secret"}))
    (folder / "weights.gguf").write_bytes(b"secret")
    args = {"pretrained": str(folder), "gguf_file": "weights.gguf"}
    assert identify(args).id == "org/secret"  # one's own run, on one's own machine
    path = tmp_path / "results_2026-01-01T00-00-00.json"
    data = {
        "results": {"dcpmi_copa": {"acc_dcpmi,none": 0.5}},
        "configs": {"dcpmi_copa": {"metadata": {"domain_premise": " so"}}},
        "config": {"model": "hf", "model_args": args},
    }
    path.write_text(json.dumps(data))
    model = read_submission(path).model
    assert (model.id, model.file_sha256, model.local_name) == (None, None, "model")


@pytest.mark.slow
def test_a_chat_template_run_verifies_and_another_recorded_template_is_never_rendered(
    shards, tmp_path, capsys
):
    """A run with --apply_chat_template records the tokenizer's template: verify renders
    that one (the tokenizer's own); a template edited in the file is refused unrendered."""
    output = tmp_path / "chat"
    status = cli.main(
        ["run", "--model", "hf", "--model_args", f"pretrained={shards['model']}",
         "--include_path", str(shards["tasks"]), "--dcpmi_task", "quiz", "--limit", "2",
         "--apply_chat_template", "--log_samples", "--output_path", str(output)]
    )  # fmt: skip
    assert status == 0
    status, out = run(capsys, command("verify", [output], shards, tmp_path / "out"))
    assert status == 0, out
    marker = tmp_path / "ran"
    (path,) = output.rglob("results_*.json")
    data = json.loads(path.read_text())
    assert data["chat_template"]
    data["chat_template"] = template_payload(marker) + data["chat_template"]
    path.write_text(json.dumps(data))
    status, out = run(capsys, command("verify", [output], shards, tmp_path / "out"))
    assert status == 1 and not marker.exists()
    assert (
        "cannot be built again here: its recorded chat_template is not the tokenizer's own"
    ) in out
