"""How lm-eval finds the plugin's tasks: the start-up hook, --include_path, the Python API,
and what the start-up hook costs the programs that never use lm-eval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from helpers import embedded_model_args

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi._autoload import with_plugin_path
from lm_eval_dcpmi.core.scoring import ACCURACIES, COUNTS
from lm_eval_dcpmi.hf_prefix.lm import PrefixHFLM

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
    (model,) = entry_points(group="lm_eval.models", name="hf-prefix")
    assert model.value == "lm_eval_dcpmi.hf_prefix.lm:PrefixHFLM"
    assert model.load() is PrefixHFLM
    (tasks,) = entry_points(group="lm_eval.tasks", name="dcpmi")
    assert tasks.load()() == OURS


@pytest.mark.fast
def test_the_names_task_yamls_give_stay_where_they_were():
    # `class: !function lm_eval_dcpmi.task.DCPMITask`, `custom_dataset: !function
    # lm_eval_dcpmi.data.jsonl`: lm-eval imports the module and takes the attribute
    from lm_eval_dcpmi import data, task
    from lm_eval_dcpmi.core.task import DCPMITask
    from lm_eval_dcpmi.data import loaders

    assert task.DCPMITask is DCPMITask
    for name in data.__all__:
        assert getattr(data, name) is getattr(loaders, name)
    named = set()
    for path in OURS.rglob("*"):
        if path.is_file() and (path.suffix == ".yaml" or path.name.endswith("_yaml")):
            text = path.read_text(encoding="utf-8")
            named.update(w for w in text.split() if w.startswith("lm_eval_dcpmi.data."))
    assert named and {n.removeprefix("lm_eval_dcpmi.data.") for n in named} <= set(data.__all__)


@pytest.mark.usefixtures("data_dir")
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
