"""What several test files share: where the data and the embedded model are, building tasks
and requests, the `dcpmi` command, and comparing ``hf`` with ``hf-prefix``.

Plain functions and constants; the fixtures are in conftest.py. The report tests' hand-made
results are in report_helpers.py. Importing this module loads no model and reads no data.
"""

from __future__ import annotations

import fcntl
import functools
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import yaml

from lm_eval_dcpmi import embedded

if TYPE_CHECKING:
    from lm_eval_dcpmi.task._dcpmi_task import DCPMITask

ROOT = Path(__file__).resolve().parents[1]


def script(name: str) -> ModuleType:
    """A module of scripts/ (the checkout's tools, not in the wheel), imported with that
    folder on ``sys.path``, as when the script runs."""
    folder = str(ROOT / "scripts")
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module(name)


# ------------------------------------------------------------------ the data and the model

# Tests read the real evaluation files from ../shared/data (never copied into the project).
SHARED_DATA = Path(os.environ.get("DCPMI_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
# Without them the tests that need them are skipped with this reason (scripts/test.sh sets
# DCPMI_REQUIRE_DATA=1: then pytest stops at once with it instead).
MISSING_DATA = (
    "the evaluation data is missing: {path} does not exist. The tests read the real data "
    "files; put them there (a checkout of the project beside its `shared/` folder) or set "
    "DCPMI_DATA_DIR to the folder that holds them (see README, Data)."
)
HELLASWAG_FILE = "hellaswag/hellaswag_val.jsonl"


def skip_unless_rebuilt_hellaswag(data_dir: Path) -> None:
    """Skip a test that pins the rebuilt HellaSwag file's content (the committed results,
    first_documents.json) when ``data_dir`` holds another file, e.g. the upstream one that
    ``dcpmi fetch`` brings (docs/tasks.md, Data)."""
    import pytest

    from lm_eval_dcpmi.data import known_as, sha256_of
    from lm_eval_dcpmi.data._folders import dataset_module

    rebuilt = dataset_module("hellaswag").REBUILT_SHA256
    path = data_dir / HELLASWAG_FILE
    here = sha256_of(path) if path.exists() else None
    if here != rebuilt:
        what = "no such file" if here is None else known_as(HELLASWAG_FILE, here) or "another file"
        pytest.skip(
            f"{path} is not the rebuilt HellaSwag file (sha256 {rebuilt[:16]}...) that this "
            f"test pins, but {what}"
            + (f" (sha256 {here[:16]}...)" if here else "")
            + ": see docs/tasks.md, Data"
        )


GGUF_FILE = embedded.GGUF_FILE
embedded_model_dir = embedded.model_dir
embedded_model_args = embedded.model_args
embedded_model_args_string = embedded.model_args_string

# The real lm_eval CLI run that the end-to-end and report tests share (conftest.lm_eval_run):
# every dcpmi task, a few documents each, samples logged.
E2E_TASKS = os.environ.get("DCPMI_E2E_TASKS", "dcpmi")
E2E_LIMIT = 3

# What scripts/test.sh runs under the other supported lm-eval releases: every test that
# needs no model, and the few marked `api` that run it through lm-eval's Python API (where
# releases differ); conftest marks every test that loads the model `model`.
OTHER_RELEASES = "fast or api"
LM_EVAL_05 = importlib.metadata.version("lm-eval").startswith("0.5")


def unknown_task_words(name: str) -> str:
    """How the installed lm-eval refuses one unknown task name (0.4: ``process_tasks``;
    0.5.0.dev1: ``TaskManager._load_spec``)."""
    if LM_EVAL_05:
        return f"Spec '{name}' is not a registered task/group/tag name or valid YAML path"
    return f"Tasks not found: {name}"


# ------------------------------------------------------------------ tasks and requests


def load_task(task_manager, name: str):
    return task_manager.load([name])["tasks"][name]


def bare(name: str) -> str:
    """A name without the ``group::`` path that lm-eval 0.5 puts before a group's members
    (in ``TaskManager.load``'s keys and ``Group.child_names``; 0.4 has none)."""
    return name.rsplit("::", 1)[-1]


def tasks_by_name(loaded: dict) -> dict:
    """``TaskManager.load(...)["tasks"]`` keyed by each task's own name."""
    return {bare(key): task for key, task in loaded["tasks"].items()}


def request_pairs(task, n_docs: int) -> list[list[tuple[str, str]]]:
    """(context, continuation) of the conditional and reference requests of the task's first
    ``n_docs`` documents (the carrier's content-free requests left out: tests of those
    are in tests/test_calibration_harness.py)."""
    task.build_all_requests(limit=n_docs, rank=0, world_size=1)
    by_doc: dict[int, list] = {}
    for instance in task.instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    pairs = []
    for doc_id in sorted(by_doc):
        requests = sorted(by_doc[doc_id], key=lambda i: i.idx)
        layout = getattr(task, "layout", None)  # None: lm-eval's own task, its requests
        kept = requests
        if layout is not None:
            n_options, _carrier = layout.n_options([i.arguments[1] for i in requests])
            kept = requests[: layout.n_requests(n_options, carrier=False)]
        pairs.append([tuple(i.arguments[:2]) for i in kept])
    return pairs


# A tiny DCPMITask on in-memory documents (no data folder, no tokenizer).
DOCS = [
    {"question": "Two plus two is", "options": ["four", "five"], "gold": 0},
    {"question": "The sky is", "options": ["green", "blue"], "gold": 1},
]


def tiny_dataset(docs=None):
    import datasets

    def load(**_metadata):
        return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs or DOCS)})

    return load


def make_task(docs=None, **overrides) -> DCPMITask:
    from lm_eval_dcpmi.task._dcpmi_task import DCPMITask

    config = {
        "task": "tiny_dcpmi",
        "custom_dataset": tiny_dataset(docs),
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "{{question}}",
        "doc_to_choice": "{{options}}",
        "doc_to_target": "gold",
        "domain_premise": " The answer:",
        "metadata": {"version": 1},
    }
    config.update(overrides)
    return DCPMITask(config={k: v for k, v in config.items() if v is not None})


@functools.cache
def plugin_task_manager():
    """A TaskManager of lm-eval's tasks and the plugin's, with the embedded model's tokenizer
    in its metadata: made once a process, since indexing lm-eval's ~15,000 YAML files takes
    ~10 s (its ``load`` builds new tasks on every call, so tests may share it)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_dcpmi import task_configs_dir

    return TaskManager(include_path=str(task_configs_dir()), metadata=embedded_model_args())


def evaluate(hf_lm, tasks, task_manager=None, **kwargs) -> dict:
    """lm-eval's ``simple_evaluate`` on a loaded model, samples logged."""
    import lm_eval

    manager = task_manager or plugin_task_manager()
    return lm_eval.simple_evaluate(
        model=hf_lm, tasks=tasks, task_manager=manager, log_samples=True, **kwargs
    )


# ------------------------------------------------------------------ hf against hf-prefix

# Scores are compared within 1e-4: ``hf`` itself moves by up to ~3e-5 between batch sizes.
TOLERANCE = 1e-4


def instances(pairs):
    from lm_eval.api.instance import Instance

    return [
        Instance(request_type="loglikelihood", doc={}, arguments=tuple(pair), idx=i)
        for i, pair in enumerate(pairs)
    ]


def plain_lm(hf_lm, **kwargs):
    """An ``hf`` model on the weights of ``hf_lm`` (no second load)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=hf_lm.model, tokenizer=hf_lm.tokenizer, device="cpu", **kwargs)


def assert_same(expected, got, labels):
    assert len(expected) == len(got)
    for (want_ll, want_greedy), (ll, greedy), label in zip(expected, got, labels, strict=True):
        assert abs(want_ll - ll) <= TOLERANCE, f"{label}: hf {want_ll} vs hf-prefix {ll}"
        assert want_greedy == greedy, f"{label}: is_greedy hf {want_greedy} vs {greedy}"


def generic_pairs() -> list[tuple[str, str]]:
    """A loglikelihood request set of the kind lm-eval's own tasks send."""
    story = "The quick brown fox jumps over the lazy dog. The dog sleeps on"
    return [
        (story, " the porch."),
        (story, " the porch."),  # identical request
        (story, " a"),  # one-token continuation, same context
        (story, " the"),
        (story + " ", "the mat."),  # trailing space moves into the continuation
        ("Question: What is 2 + 2?\nAnswer:", " 4"),
        ("Question: What is 2 + 2?\nAnswer:", " four, as everyone knows"),
        ("", "Hello world, this is an empty context."),  # prefix-token case
        ("", "Hello"),
        ("A", " B C D E F G H I J K L M N O P"),
        ("Paris is the capital of", " France"),
        ("Paris is the capital of", " Germany"),
    ]


def run_once(tmp_path_factory, name: str, command: list[str]) -> tuple[Path, str]:
    """``command`` (its output folder appended as ``--output_path``) run once per test
    session: under pytest-xdist the first worker to ask runs it, the others wait on a lock
    in the temporary folder the workers share and read its output. Returns the output
    folder and the command's stdout."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    output_dir, outcome = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            full = [*command, "--output_path", str(output_dir)]
            completed = subprocess.run(full, capture_output=True, text=True, timeout=1200)
            run = {"returncode": completed.returncode, "stdout": completed.stdout,
                   "stderr": completed.stderr}  # fmt: skip
            outcome.write_text(json.dumps(run))
    run = json.loads(outcome.read_text())
    assert run["returncode"] == 0, run["stderr"][-4000:]
    return output_dir, run["stdout"]


def lm_eval_once(
    tmp_path_factory, name: str, tasks: str, limit: int = E2E_LIMIT
) -> tuple[Path, str]:
    """The real ``lm_eval`` CLI on the embedded model (``tasks``, ``limit`` documents each,
    samples logged), run once per test session (``run_once``)."""
    command = [
        str(Path(sys.executable).with_name("lm_eval")),
        "--model", "hf",
        "--model_args", embedded_model_args_string(),
        "--device", "cpu",
        "--batch_size", "8",
        "--tasks", tasks,
        "--limit", str(limit),
        "--log_samples",
    ]  # fmt: skip
    return run_once(tmp_path_factory, name, command)


# The shards tests' task: small (56 documents), with CC's content-free requests and BC.
SHARDED_TASK = "dcpmi_cb"
# Each shard and the unsharded run: the `hf` model one request at a time, so that a request
# gets the same loglikelihood in every run (batches of other sizes could differ in the last
# bits); samples logged. Three shards: 19, 19 and 18 documents, uneven (each run costs a
# model load and its documents; CI's time).
SHARDED_RUNS = {"whole": [], **{f"{k}of3": ["--shard", f"{k}/3"] for k in (1, 2, 3)}}


def dcpmi_once(tmp_path_factory, name: str, args: list[str]) -> Path:
    """``dcpmi run ARGS --log_samples`` on the embedded model, once per test session."""
    command = [str(Path(sys.executable).with_name("dcpmi")), "run", *args, "--log_samples"]
    return run_once(tmp_path_factory, name, command)[0]


def tiny_model(folder: Path, model_type: str = "llama", seed: int = 0, **config) -> Path:
    """A random-weight model of ``model_type`` (transformers' config for it, 2 layers of
    64), with the embedded model's tokenizer, saved in ``folder``: a real architecture in
    seconds, with no download."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir(), gguf_file=GGUF_FILE)
    settings = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "intermediate_size": 128,
                "max_position_embeddings": 2048, "vocab_size": len(tokenizer),
                "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                **config}  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class ForwardTokens:
    """Counts the token positions passed to a model's forward calls."""

    def __init__(self, model):
        self.tokens = 0
        self.model = model

    def __enter__(self):
        def count(_module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.tokens += ids.numel()

        self.handle = self.model.register_forward_pre_hook(count, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


# ------------------------------------------------------------------ the dcpmi command

DCPMI = str(Path(sys.executable).with_name("dcpmi"))
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))


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


def read_only_file_system(monkeypatch, root: Path) -> None:
    """``root`` made, and a read-only file system mounted there: making a folder under it
    fails with EROFS, the kernel's answer (``OSError: [Errno 30]``); no test machine
    mounts one."""
    import errno

    root.mkdir(parents=True, exist_ok=True)
    make = os.mkdir
    inside = root.resolve()

    def mkdir(path, *args, **kwargs):
        if inside in Path(path).resolve().parents:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return make(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    # Python 3.10's Path.mkdir calls the os.mkdir its pathlib bound when imported.
    import pathlib

    if hasattr(pathlib, "_NormalAccessor"):
        monkeypatch.setattr(pathlib._NormalAccessor, "mkdir", staticmethod(mkdir))


def lm_eval_tasks(argv: list[str]) -> list[str]:
    """The task list lm-eval's own parser makes of a `dcpmi run` command line."""
    from lm_eval._cli.harness import HarnessCLI

    return HarnessCLI()._parser.parse_args(argv[1:]).tasks


def top_level_names(path: Path) -> set[str]:
    """What the module at ``path`` defines at its top (classes, functions, assignments,
    imports), read with ``ast``; a package ``__init__``'s ``_EXPORTS`` keys too."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets):
                names |= set(ast.literal_eval(node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


# ------------------------------------------------------------------ a user's own quiz task

# The class line a DC-PMI task's YAML carries (a YAML tag: yaml.safe_dump cannot write it).
DCPMI_CLASS = "class: !function lm_eval_dcpmi.task.DCPMITask"


def quiz_yaml(task: str, data_file: Path | str, *, dcpmi: bool = False, **fields: Any) -> str:
    """A local multiple-choice task's YAML, the skeleton the tests' quizzes share: a JSON Lines
    file as its test split, then ``fields`` (Python values, written as YAML) and, for
    ``dcpmi``, the plugin's class."""
    config = {
        "task": task,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        **fields,
    }
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=1 << 16)
    return text + (DCPMI_CLASS + "\n" if dcpmi else "")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_quiz_task(
    folder: Path, task: str, rows: list[dict], *, dcpmi: bool = False, **fields: Any
) -> Path:
    """``rows`` as ``folder/quiz.jsonl`` and the task's YAML, ``folder/<task>.yaml``."""
    data = write_jsonl(folder / "quiz.jsonl", rows)
    path = folder / f"{task}.yaml"
    path.write_text(quiz_yaml(task, data, dcpmi=dcpmi, **fields))
    return path


def quiz_manager(folder: Path, **options: Any):
    """A TaskManager of ``folder``'s tasks only (indexing lm-eval's own takes ~10 s)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(folder), include_defaults=False, **options)


def load_quiz(folder: Path, task: str):
    """``task`` of ``folder``, built."""
    return quiz_manager(folder).load([task])["tasks"][task]


# A task that is not the plugin's: the user's own quiz, on local data files.
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
        {"metric": "brier_score", "higher_is_better": False},  # lm-eval's own aggregation
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


# ---- a copy of the project, changed as a contributor would ------------------------------


def copy_project(target: Path, parts: tuple[str, ...] = ("lm_eval_dcpmi",)) -> Path:
    """``parts`` of the repository (folders, or files) copied under ``target``."""
    import shutil

    for part in parts:
        if (ROOT / part).is_dir():
            shutil.copytree(
                ROOT / part, target / part, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(ROOT / part, target / part)
    return target


# What the fast tier reads: the whole project, as a contributor's checkout holds it.
PROJECT = (
    "lm_eval_dcpmi", "task_configs", "tests", "docs", "results", "scripts", "benchmarks", ".ci",
    "README.md", "CHANGELOG.md", "pyproject.toml", ".gitignore",
    "lm_eval_dcpmi_autoload.py", "lm_eval_dcpmi_autoload.pth",
)  # fmt: skip


FAST_TIER_COPY = "LM_EVAL_DCPMI_FAST_TIER_COPY"


def fast_tier_in_copy(project: Path) -> str:
    """The fast tier (``pytest -m fast``) of a ``copy_project(..., PROJECT)`` copy: its own
    tests on its own package, with no data; its summary line (asserting it passed)."""
    if os.environ.get(FAST_TIER_COPY):  # a test of the fast tier that runs the fast tier
        raise AssertionError("fast_tier_in_copy inside a copy's fast tier: mark it not fast")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DCPMI_"))}
    env[FAST_TIER_COPY] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "fast", "-p", "no:cacheprovider", "tests"],
        capture_output=True, text=True, cwd=project, check=False,
        env={**env, "PYTHONPATH": str(project), "DCPMI_DATA_DIR": str(project / "no-data")},
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary
    return summary


def changed_files(project: Path) -> list[str]:
    """The files of a ``copy_project`` copy that differ from the repository's, or are new."""
    import filecmp

    def differs(path: Path) -> bool:
        original = ROOT / path.relative_to(project)
        return not original.is_file() or not filecmp.cmp(path, original, shallow=False)

    return sorted(
        str(path.relative_to(project))
        for path in project.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and differs(path)
    )


def run_in_copy(project: Path, script: str, **env: str) -> dict:
    """``script`` run by Python with ``project`` first on the path (so the copy's package is
    the one imported) and the tests' helpers importable; the JSON of its last output line."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "tests")],
        capture_output=True, text=True, cwd=project, check=False,
        env={**os.environ, "PYTHONPATH": str(project), **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
