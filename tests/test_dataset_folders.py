"""A dataset is one folder: ``task_configs/<dataset>/`` (see lm_eval_dcpmi/data/_folders.py).

The folders hold everything about their dataset; what is written elsewhere (the groups'
task lists, docs/tasks.md's counts) is checked against them here. On the real files: each
task's document count and first documents, as the folder's ``first_documents.json``
states them. And a throwaway 17th dataset, added as one folder to a copy of the project,
is scored with nothing else changed.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import yaml
from helpers import (
    PROJECT,
    ROOT,
    changed_files,
    copy_project,
    fast_tier_in_copy,
    load_task,
    request_pairs,
    run_in_copy,
    skip_unless_rebuilt_hellaswag,
)

from lm_eval_dcpmi import _paper as paper
from lm_eval_dcpmi.data import _folders as folders
from lm_eval_dcpmi.data import _records as records

TASK_CONFIGS = ROOT / "task_configs"
FOLDERS = folders.dataset_folders(TASK_CONFIGS)


def first_documents(folder: Path) -> dict:
    return json.loads((folder / folders.FIRST_DOCUMENTS).read_text(encoding="utf-8"))


def checked_tasks() -> dict[str, tuple[str, dict]]:
    """Task -> (its dataset folder, what the folder's first_documents.json says of it)."""
    return {
        task: (name, entry)
        for name, folder in FOLDERS.items()
        for task, entry in first_documents(folder).items()
    }


def assert_first_documents(task, expected: dict) -> None:
    """The built ``task`` has the document count, gold indices and requests of
    ``expected`` (an entry of a first_documents.json)."""
    assert len(task.eval_docs) == expected["documents"]
    n = len(expected["first"])
    assert [task.eval_docs[i]["gold"] for i in range(n)] == [d["gold"] for d in expected["first"]]
    assert request_pairs(task, n) == [[tuple(r) for r in d["requests"]] for d in expected["first"]]


def _yamls(folder: Path) -> list[dict]:
    return [paper.load_yaml(path) for path in sorted(folder.rglob("*.yaml"))]


# ---- the folders ----------------------------------------------------------------------


@pytest.mark.fast
def test_every_dataset_folder_holds_its_files():
    # the folders are what holds a dataset.py; the paper's 13 datasets among them
    assert sorted(FOLDERS) == sorted(p.parent.name for p in TASK_CONFIGS.glob("*/dataset.py"))
    assert {checked_tasks()[task][0] for task in paper.paper_order()} <= set(FOLDERS)
    assert len({checked_tasks()[task][0] for task in paper.paper_order()}) == 13
    for name, folder in FOLDERS.items():
        for file in folders.FOLDER_FILES:
            assert (folder / file).is_file(), f"task_configs/{name} has no {file}"
        readme = (folder / folders.README).read_text(encoding="utf-8")
        for task in first_documents(folder):  # the README names each task it documents
            assert f"`{task}`" in readme, (name, task)


@pytest.mark.fast
def test_every_task_yaml_names_a_file_its_folder_can_fetch_and_a_known_reader():
    readers = {**records.SHARED, **{k: v for k, (v, _) in folders.record_readers().items()}}
    seen = 0
    for path in sorted(TASK_CONFIGS.rglob("*.yaml")):
        kwargs = paper.load_yaml(path).get("dataset_kwargs") or {}
        if "file" not in kwargs:
            continue
        seen += 1
        dataset = kwargs["file"].split("/", 1)[0]
        where = path.relative_to(ROOT)
        assert dataset in FOLDERS, f"{where}: {kwargs['file']} is in no dataset folder"
        assert folders.upstream(kwargs["file"]) is not None, f"{where}: no upstream address"
        assert kwargs["record"] in readers, f"{where}: unknown record {kwargs['record']}"
    assert seen >= 16


@pytest.mark.fast
def test_an_unknown_record_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown record type 'nope'.*known: agnews, boolq"):
        records.get("nope")


@pytest.mark.fast
def test_the_papers_tasks_and_their_priors_are_the_folders():
    checked = checked_tasks()
    # every task of the paper's group has its first documents checked by its folder (a
    # folder may check more: a dataset outside the paper's group)
    assert set(paper.paper_order()) <= set(checked)
    # and the priors group scores each of them, from a YAML in the same folder
    priors = yaml.safe_load((TASK_CONFIGS / "dcpmi_priors.yaml").read_text(encoding="utf-8"))
    defined = {
        data["task"]: name
        for name, folder in FOLDERS.items()
        for data in _yamls(folder)
        if isinstance(data.get("task"), str)
    }
    expected = [t.replace("dcpmi_", "dcpmi_priors_", 1) for t in paper.paper_order()]
    assert priors["task"] == expected
    for task in expected:
        assert defined[task] == checked[task.replace("dcpmi_priors_", "dcpmi_", 1)][0], task


@pytest.mark.fast
def test_the_task_tables_counts_are_the_folders():
    text = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(dcpmi_\w+)` \| [^|]+ \| ([\d,]+) \|", text, re.MULTILINE))
    counts = {task: entry["documents"] for task, (_, entry) in checked_tasks().items()}
    # the table lists the paper's tasks (and may list others), each with its folder's count
    assert set(paper.paper_order()) <= set(rows)
    assert {task: int(n.replace(",", "")) for task, n in rows.items()} == {
        task: counts[task] for task in rows
    }


# ---- on the real files ----------------------------------------------------------------


@pytest.mark.parametrize("task_name", sorted(checked_tasks()))
def test_count_and_first_documents_are_the_folders(task_manager, task_name, caplog, data_dir):
    folder, expected = checked_tasks()[task_name]
    if folder == "hellaswag":  # its first_documents.json holds the rebuilt file's
        skip_unless_rebuilt_hellaswag(data_dir)
    with caplog.at_level(logging.WARNING):
        task = load_task(task_manager, task_name)
    assert_first_documents(task, expected)
    # the paper's premises know no answer, and no two options are one text in two forms
    warned = [r.getMessage() for r in caplog.records]
    assert not [w for w in warned if "away" in w or "Unicode normalization" in w], warned


# ---- a 17th dataset is one folder -----------------------------------------------------

TOY = {
    "dcpmi_toy.yaml": """\
include: ../_dcpmi_template_yaml
task: dcpmi_toy
custom_dataset: !function lm_eval_dcpmi.data.jsonl
dataset_kwargs:
  file: toy/questions.jsonl
  record: toy
doc_to_text: " Q: {{question}}\\n A:"
doc_to_choice: [" yes", " no"]
domain_premise: "\\n A:"
""",
    "dataset.py": '''\
"""Toy yes/no questions: a throwaway dataset (tests/test_dataset_folders.py)."""

from lm_eval_dcpmi.data import Row, Upstream, index_in, nonempty

FILES = {"toy/questions.jsonl": Upstream("https://example.org/toy/questions.jsonl")}


def toy(row: Row) -> Row:
    nonempty(row, "question")
    return {**row, "gold": index_in(row["answer"], ["yes", "no"], "answer")}


RECORDS = {"toy": toy}
''',
    "README.md": "# Toy\n\n`dcpmi_toy`: two yes/no questions, for a test.\n",
    "first_documents.json": json.dumps(
        {
            "dcpmi_toy": {
                "documents": 3,
                "first": [
                    {
                        "gold": 1,
                        "requests": [
                            [" Q: Is snow green?\n A:", " yes"],
                            [" Q: Is snow green?\n A:", " no"],
                            ["\n A:", " yes"],
                            ["\n A:", " no"],
                        ],
                    },
                    {
                        "gold": 0,
                        "requests": [
                            [" Q: Is snow cold?\n A:", " yes"],
                            [" Q: Is snow cold?\n A:", " no"],
                            ["\n A:", " yes"],
                            ["\n A:", " no"],
                        ],
                    },
                ],
            }
        }
    ),
}
TOY_DATA = [
    {"question": "Is snow green?", "answer": "no"},
    {"question": "Is snow cold?", "answer": "yes"},
    {"question": "Is fire hot?", "answer": "yes"},
]

# Run in the copy: the plugin finds the folder, lm-eval builds the task, and the folder's
# own first_documents.json is checked as the real folders' are.
TOY_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])  # the tests' helpers
from lm_eval.tasks import TaskManager
from test_dataset_folders import assert_first_documents

from lm_eval_dcpmi import task_configs_dir
from lm_eval_dcpmi.data import _folders as folders

folder = folders.dataset_folders()["toy"]
task = TaskManager().load(["dcpmi_toy"])["tasks"]
(task,) = task.values()
expected = json.loads((folder / "first_documents.json").read_text())["dcpmi_toy"]
assert_first_documents(task, expected)
print(json.dumps({"configs": str(task_configs_dir()), "metrics": [m.name for m in task.metrics]}))
"""


def test_a_throwaway_17th_dataset_is_one_folder(tmp_path):
    project = copy_project(
        tmp_path / "project", ("lm_eval_dcpmi", "task_configs", "lm_eval_dcpmi_autoload.py")
    )
    toy = project / "task_configs" / "toy"
    toy.mkdir()
    for name, text in TOY.items():
        (toy / name).write_text(text, encoding="utf-8")
    data = tmp_path / "data" / "toy"  # the data file lives outside the project
    data.mkdir(parents=True)
    (data / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TOY_DATA))
    # the dataset needed one folder and nothing else
    assert changed_files(project) == [f"task_configs/toy/{name}" for name in sorted(TOY)]

    found = run_in_copy(
        project, TOY_CHECK, DCPMI_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1"
    )
    assert found["configs"] == str(project / "task_configs")
    assert found["metrics"][-6:] == [
        "acc_dcpmi", "pma", "pma_domain", "truncated", "unranked", "tied_domain"
    ]  # fmt: skip


# ---- a 14th dataset, copied from cb under a new name, passes the fast tier ----------------


def copied_folder(source: Path, target: Path, old: str, new: str) -> list[str]:
    """``source``'s files written to ``target`` as another dataset: its folder, data files,
    record reader and tasks renamed from ``old`` to ``new``; it keeps ``old``'s tags (a new
    classification dataset joins ``dcpmi_classification`` and ``dcpmi_priors_tasks``). Returns
    the files written, relative to ``target``."""
    target.mkdir()
    written = []
    for path in sorted(source.iterdir()):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        text = text.replace(f"dcpmi_{old}", f"dcpmi_{new}").replace(
            f"dcpmi_priors_{old}", f"dcpmi_priors_{new}"
        )
        text = text.replace(f"{old}/", f"{new}/")  # the data files: <dataset>/<file>
        text = text.replace(f"record: {old}\n", f"record: {new}\n")
        text = text.replace(f'RECORDS = {{"{old}": ', f'RECORDS = {{"{new}": ')
        name = path.name.replace(f"_{old}.", f"_{new}.")
        (target / name).write_text(text, encoding="utf-8")
        written.append(name)
    return written


def test_a_14th_dataset_folder_copied_from_cb_joins_its_tags_and_passes_the_fast_tier(tmp_path):
    """ "A dataset is one folder", measured by the suite itself: the fast tier (every check of
    the folders, the groups and tags, the task listing, the docs) passes in a copy of the
    project that holds one more folder, in cb's tags, and nothing else changed."""
    project = copy_project(tmp_path / "project", PROJECT)
    written = copied_folder(
        TASK_CONFIGS / "cb", project / "task_configs" / "cb_copy", "cb", "cb_copy"
    )
    assert changed_files(project) == sorted(f"task_configs/cb_copy/{name}" for name in written)
    assert "dcpmi_cb_copy.yaml" in written and "dataset.py" in written
    summary = fast_tier_in_copy(project)
    assert int(summary.split(" passed")[0].split()[-1]) > 300, summary
