"""How lm-eval finds the plugin's tasks: the start-up hook, --include_path, the Python API,
and what the start-up hook costs the programs that never use lm-eval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from helpers import embedded_model_args

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi._autoload import with_plugin_path
from lm_eval_dcpmi.hf_prefix._lm import PrefixHFLM
from lm_eval_dcpmi.rules._scoring import ACCURACIES, COUNTS

OURS = task_configs_dir()


@pytest.mark.fast
def test_plugin_path_comes_first_and_only_once(tmp_path):
    assert with_plugin_path(None) == [OURS]
    assert with_plugin_path(str(tmp_path)) == [OURS, str(tmp_path)]
    assert with_plugin_path([tmp_path, "x"]) == [OURS, tmp_path, "x"]
    assert with_plugin_path([str(OURS)]) == [str(OURS)]


def known_tasks(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter (as a user would) and return its JSON output."""
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=Path(__file__).parent.parent.parent,  # outside the project
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


LIST_TASKS = """
import json
from lm_eval.tasks import TaskManager
tm = TaskManager(include_path=%r)
print(json.dumps({"copa": "dcpmi_copa" in tm.all_tasks, "arc": "arc_easy" in tm.all_tasks}))
"""


def test_installed_package_registers_its_tasks_at_start_up():
    assert known_tasks(LIST_TASKS % None) == {"copa": True, "arc": True}


def test_hook_can_be_switched_off_and_include_path_still_works():
    assert known_tasks(LIST_TASKS % None, LM_EVAL_DCPMI_AUTOLOAD="0") == {
        "copa": False,
        "arc": True,
    }
    assert known_tasks(LIST_TASKS % str(OURS), LM_EVAL_DCPMI_AUTOLOAD="0") == {
        "copa": True,
        "arc": True,
    }


# What of the plugin a fresh interpreter has imported and installed, before and after CODE.
START_UP = """
import json, sys
def state():
    return {
        "ours": sorted(name for name in sys.modules if "dcpmi" in name),
        "watching": [type(f).__name__ for f in sys.meta_path if "Watcher" in type(f).__name__],
        "excepthook": getattr(sys.excepthook, "_dcpmi", False),
    }
start = state()
%s
print(json.dumps({"start": start, "after": state()}))
"""
TINY = ["lm_eval_dcpmi_autoload"]  # the one module the .pth line imports


def test_start_up_imports_one_tiny_module_until_lm_eval_is_imported():
    patched = "from lm_eval.tasks import TaskManager; assert TaskManager.__init__._dcpmi_patched"
    ran = known_tasks(START_UP % patched)
    assert ran["start"] == {"ours": TINY, "watching": ["LmEvalWatcher"], "excepthook": False}
    # lm-eval's task manager was imported: the plugin patched it, and installed no excepthook
    assert "lm_eval_dcpmi._autoload" in ran["after"]["ours"]
    assert ran["after"]["excepthook"] is False  # a program using lm-eval's API keeps its own


def test_the_switch_leaves_only_the_pth_lines_own_import():
    ran = known_tasks(START_UP % "from lm_eval.tasks import TaskManager; TaskManager()",
                      LM_EVAL_DCPMI_AUTOLOAD="0")  # fmt: skip
    assert ran["start"] == {"ours": TINY, "watching": [], "excepthook": False}
    assert ran["after"] == ran["start"]


def test_the_excepthook_is_installed_by_lm_evals_command_line_only():
    ran = known_tasks(START_UP % "import lm_eval.__main__")
    assert ran["after"]["excepthook"] is True
    assert known_tasks(START_UP % "import lm_eval.__main__", LM_EVAL_DCPMI_AUTOLOAD="0")[
        "after"
    ] == {"ours": TINY, "watching": [], "excepthook": False}


@pytest.mark.fast
def test_entry_points_for_lm_evals_plugin_groups():
    """Declared for the lm-eval that reads them (models: PR #4013; tasks: PR #4015)."""
    from lm_eval_dcpmi._autoload import MODELS

    (model,) = entry_points(group="lm_eval.models", name="hf-prefix")
    assert model.value == MODELS["hf-prefix"] == "lm_eval_dcpmi.hf_prefix:PrefixHFLM"
    assert model.load() is PrefixHFLM
    (tasks,) = entry_points(group="lm_eval.tasks", name="dcpmi")
    assert tasks.load()() == OURS


@pytest.mark.fast
def test_the_names_task_yamls_give_stay_where_they_were():
    # `class: !function lm_eval_dcpmi.task.DCPMITask`, `custom_dataset: !function
    # lm_eval_dcpmi.data.jsonl`: lm-eval imports the module and takes the attribute
    from lm_eval_dcpmi import data, task
    from lm_eval_dcpmi.data import _loaders as loaders
    from lm_eval_dcpmi.task._dcpmi_task import DCPMITask

    assert task.DCPMITask is DCPMITask
    # lm-eval's own way: __import__(module, fromlist=[name]), then the attribute
    imported = __import__("lm_eval_dcpmi.task", fromlist=["DCPMITask"])
    assert imported.DCPMITask is DCPMITask
    named = set()
    for path in OURS.rglob("*"):
        if path.is_file() and (path.suffix == ".yaml" or path.name.endswith("_yaml")):
            text = path.read_text(encoding="utf-8")
            named.update(w for w in text.split() if w.startswith("lm_eval_dcpmi.data."))
    loaders_named = {n.removeprefix("lm_eval_dcpmi.data.") for n in named}
    assert len(loaders_named) >= 5 and loaders_named <= set(data.__all__)
    for name in loaders_named:
        loader = getattr(__import__("lm_eval_dcpmi.data", fromlist=[name]), name)
        assert loader is getattr(loaders, name)


@pytest.mark.usefixtures("data_dir")
@pytest.mark.api
def test_python_api_with_a_loaded_model(hf_lm):
    """simple_evaluate with an LM object: the tokenizer comes from TaskManager metadata."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    results = simple_evaluate(
        model=hf_lm,
        tasks=["dcpmi_copa"],
        limit=2,
        task_manager=TaskManager(metadata=embedded_model_args()),
    )
    row = results["results"]["dcpmi_copa"]
    assert {f"{metric},none" for metric in (*ACCURACIES, *COUNTS)} <= set(row)
    # With the tokenizer known, acc_avg and truncated are numbers (NaN without one).
    assert row["acc_avg,none"] in (0.0, 0.5, 1.0)
    assert row["truncated,none"] == 0.0


# ------------------------------------------------ a fault of the plugin's part fails soft

TINY_TASK = """\
task: tiny_plain
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
"""


def tiny_plain_task(folder: Path) -> Path:
    """A plain lm-eval task (no DC-PMI) on a two-document local file, in ``folder``."""
    data = folder / "tiny.jsonl"
    rows = [
        {"question": "Is snow cold?", "choices": ["yes", "no"], "answer": 0},
        {"question": "Is fire cold?", "choices": ["yes", "no"], "answer": 1},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (folder / "tiny_plain.yaml").write_text(TINY_TASK.format(data=data), encoding="utf-8")
    return folder


def fault_message(what: str, error: str) -> str:
    return (
        f"lm-eval-dcpmi: {what} failed ({error}); lm_eval goes on without the plugin's "
        "tasks and models. `dcpmi run` shows the error; LM_EVAL_DCPMI_AUTOLOAD=0 switches "
        "the hook off."
    )


@pytest.mark.fast
@pytest.mark.parametrize("where", ["_autoload.with_plugin_path", "derive.note_task_manager"])
def test_a_fault_in_the_task_manager_hook_leaves_lm_eval_as_without_the_plugin(
    monkeypatch, tmp_path, where
):
    """Before lm-eval indexes (the plugin's folders) or after (derive's note): one warning,
    and every TaskManager indexes what it would without the plugin."""
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import _autoload, task

    def broken(_argument):
        raise RuntimeError("the plugin is broken")

    module, name = where.split(".")
    monkeypatch.setattr({"_autoload": _autoload, "derive": task}[module], name, broken)
    monkeypatch.setattr(_autoload, "_fault", None)
    monkeypatch.setattr(_autoload, "_loud", False)  # an in-process `dcpmi run` set it
    folder = str(tiny_plain_task(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        managers = [TaskManager(include_path=folder, include_defaults=False) for _ in range(2)]
    assert [sorted(manager.all_tasks) for manager in managers] == [["tiny_plain"]] * 2
    assert [str(w.message) for w in caught if "lm-eval-dcpmi" in str(w.message)] == [
        fault_message("its TaskManager hook", "RuntimeError('the plugin is broken')")
    ]


@pytest.mark.fast
def test_dcpmi_run_gets_the_task_manager_hooks_fault_itself(monkeypatch, tmp_path):
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import _autoload

    def broken(_given):
        raise RuntimeError("the plugin is broken")

    monkeypatch.setattr(_autoload, "with_plugin_path", broken)
    monkeypatch.setattr(_autoload, "_loud", True)  # as lm_eval_dcpmi_autoload.install sets
    with pytest.raises(RuntimeError, match="^the plugin is broken$"):
        TaskManager(include_path=str(tiny_plain_task(tmp_path)), include_defaults=False)


PLAIN_RUN = """
import sys
from lm_eval.__main__ import cli_evaluate
sys.argv = ["lm_eval", "--model", "dummy", "--tasks", "tiny_plain", "--include_path", %r]
cli_evaluate()
"""

FAULTY_HOOK = """
import sys
import lm_eval_dcpmi._harness as harness

def moved(*args, **kwargs):
    raise AttributeError("TaskManager moved")

harness.wrap_task_manager_init = moved  # as on an lm-eval release whose TaskManager moved
from lm_eval.__main__ import cli_evaluate
sys.argv = ["lm_eval", "--model", "dummy", "--tasks", "tiny_plain", "--include_path", %r]
cli_evaluate()
"""


def run_plain_task(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """lm_eval's command line in a fresh interpreter, on the tiny plain task; it must pass."""
    folder = str(tiny_plain_task(tmp_path))
    completed = subprocess.run(
        [sys.executable, "-c", script % folder],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        cwd=tmp_path,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


def assert_plain_task_scored(stdout: str) -> None:
    table = [row.replace(" ", "") for row in stdout.splitlines()]
    assert any(row.startswith("|tiny_plain|") and "|acc|" in row for row in table)


# Under every supported lm-eval (scripts/test.sh runs `api` tests under each release).
@pytest.mark.api
def test_a_plain_lm_eval_task_runs_with_the_plugin_installed(tmp_path):
    """lm_eval's command line, a plain task on the dummy model, the plugin's hook working."""
    completed = run_plain_task(tmp_path, PLAIN_RUN)
    assert "lm-eval-dcpmi" not in completed.stderr
    assert_plain_task_scored(completed.stdout)


@pytest.mark.api
def test_a_plain_lm_eval_task_runs_when_the_start_up_hook_fails(tmp_path):
    """lm_eval's command line, a plain task on the dummy model, with the plugin's start-up
    hook failing: one warning, then the run as without the plugin."""
    completed = run_plain_task(tmp_path, FAULTY_HOOK)
    (line,) = [line for line in completed.stderr.splitlines() if "lm-eval-dcpmi" in line]
    hook = "its start-up hook patch_task_manager(lm_eval.tasks.manager)"
    assert line.endswith(fault_message(hook, "AttributeError('TaskManager moved')"))
    assert_plain_task_scored(completed.stdout)


LOAD_EMBEDDED = """
import hashlib, json, sys
import gguf.gguf_reader
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

parses = []
build_fields = gguf.gguf_reader.GGUFReader._build_fields
def counting(self, *args, **kwargs):
    parses.append(str(self.data.filename))
    return build_fields(self, *args, **kwargs)
gguf.gguf_reader.GGUFReader._build_fields = counting

folder, name, other, once = sys.argv[1:]
unwrapped = not getattr(gguf.GGUFReader, "reads_embedded_once", False)  # the hook is on
if once == "1":
    from lm_eval_dcpmi import embedded
    embedded.parse_once()
tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
weights = hashlib.sha256()
for key, value in sorted(model.state_dict().items()):
    weights.update(key.encode() + value.numpy().tobytes())
embedded = len(parses)
gguf.GGUFReader(other)
gguf.GGUFReader(other)
print(json.dumps({
    "embedded": embedded, "other": len(parses) - embedded, "weights": weights.hexdigest(),
    "unwrapped": unwrapped,
    "vocabulary": tokenizer("DC-PMI scores the options")["input_ids"],
}))
"""


def test_the_embedded_file_is_parsed_once_per_process_and_loads_the_same_model(tmp_path):
    """Where the plugin loads the embedded model (``embedded.parse_once``), transformers parses
    its GGUF once, not six times (~13 s of each load); another GGUF file is parsed each time,
    and the model and tokenizer are those of a load without it. The start-up hook (on in
    both) leaves ``gguf`` alone in a program that merely imports it."""
    import gguf

    other = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(str(other), "llama")
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    model = embedded_model_args()
    command = [sys.executable, "-c", LOAD_EMBEDDED, model["pretrained"], model["gguf_file"]]
    loads = {}
    for once in ("1", "0"):
        completed = subprocess.run(
            [*command, str(other), once],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "LM_EVAL_DCPMI_AUTOLOAD": "1"},
            timeout=300,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        loads[once] = json.loads(completed.stdout.strip().splitlines()[-1])
    # transformers parses it for the tokenizer, the config and the weights (lm-eval: 6 times)
    assert loads["1"]["embedded"] == 1 and loads["0"]["embedded"] >= 3
    assert loads["1"]["other"] == loads["0"]["other"] == 2
    assert loads["1"]["weights"] == loads["0"]["weights"]
    assert loads["1"]["vocabulary"] == loads["0"]["vocabulary"]
    assert loads["1"]["unwrapped"] and loads["0"]["unwrapped"]


def test_the_embedded_file_is_recognised_wherever_its_package_lies(tmp_path):
    from lm_eval_dcpmi import embedded

    model = embedded_model_args()
    assert embedded.is_embedded_file(model["pretrained"], model["gguf_file"])
    copy = tmp_path / embedded.PACKAGE
    copy.mkdir()
    (copy / embedded.GGUF_FILE).symlink_to(Path(model["pretrained"], model["gguf_file"]))
    assert embedded.is_embedded_file(str(tmp_path / "elsewhere" / ".." / embedded.PACKAGE),
                                     embedded.GGUF_FILE)  # fmt: skip
    assert not embedded.is_embedded_file(model["pretrained"], "other.gguf")
    assert not embedded.is_embedded_file(str(tmp_path), embedded.GGUF_FILE)
    assert not embedded.is_embedded_file(None, embedded.GGUF_FILE)
    assert not embedded.is_embedded_file(model["pretrained"], None)


def test_an_lm_eval_that_reads_entry_points_registers_the_models_itself(monkeypatch):
    """lm-eval's main branch (PR #4013) loads the ``lm_eval.models`` entry points itself
    (``registry.load_plugins``); no release has it, so a stand-in registry module plays it."""
    from types import SimpleNamespace

    import lm_eval_dcpmi._harness as harness
    from lm_eval_dcpmi import _autoload
    from lm_eval_dcpmi._harness import _models as models

    assert not models.reads_plugin_entry_points()  # 0.4.12, 0.4.13, 0.5.0.dev1
    assert models.reads_plugin_entry_points(SimpleNamespace(load_plugins=lambda *a: None))
    assert not models.reads_plugin_entry_points(SimpleNamespace(load_plugins=None))
    registered = []
    monkeypatch.setattr(harness, "register_model", lambda name, target: registered.append(name))
    monkeypatch.setattr(harness, "reads_plugin_entry_points", lambda: True)
    _autoload.register_models(None)
    assert registered == []
    monkeypatch.setattr(harness, "reads_plugin_entry_points", lambda: False)
    _autoload.register_models(None)
    assert registered == ["hf-prefix"]
