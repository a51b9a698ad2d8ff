"""Text that stays true: every module, path and name a docstring or a page names exists, and
each package's docstring names exactly its modules (no model, no data: ``ast`` only).

Read: the docstrings (module, class, function) of the package, the start-up module,
scripts/, benchmarks/ and tests/, and the Markdown pages (README.md, docs/). Checked:

* ``lm_eval_dcpmi.a.b``: the longest part that is a module of the package, then at most one
  name that module defines at its top (or its package exports);
* a path of the checkout (``lm_eval_dcpmi/...``, ``tests/...``, ``scripts/...``,
  ``benchmarks/...``, ``task_configs/...``, ``docs/...``, ``results/...``) exists;
* in docstrings, ````pkg._x```` or ````pkg.x```` for a package of the plugin, ``x`` a module
  name it has or had (``rules.scoring``, ``leaderboard.verify``), resolves as above; a
  retired package (``tasks``, ``leaderboard``, ``harness``) never does; ````x.name```` where
  a module ``_x`` defines ``name`` is a module's old name (written ````_x.name```` in its
  package, ````package._x.name```` elsewhere);
* a package's ``__init__`` docstring names each of its modules as ````_x````, and only those.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from helpers import top_level_names

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lm_eval_dcpmi"
RETIRED = {"tasks", "leaderboard", "harness"}
# Module names the package had before its parts moved (a docstring naming one is stale).
OLD_MODULES = {
    "scoring", "layout", "registry", "probabilities", "metrics", "verify", "rebuild",
    "against_data", "recompute", "refusals", "rescore", "submission", "export", "eee", "hub",
    "model_card", "export_options", "datasets", "merge", "shard_bounds", "mergeable",
    "identity", "portable", "answer_cache", "dcpmi_task", "derive", "document_checks",
    "document_store", "null_fields", "premise_digest", "quick_look", "references",
    "rendering", "request_checks", "shards", "tokens", "processes", "content_free",
    "array_jobs", "writing", "output", "results", "samples", "tables", "looks", "loading",
    "integrity", "provenance", "documents", "task",
}  # fmt: skip
PATH = re.compile(
    r"(?<![\w./-])((?:lm_eval_dcpmi|tests|scripts|benchmarks|task_configs|docs|results)"
    r"/[\w./*<>-]*[\w/*>])"
)
DOTTED = re.compile(r"(?<![\w.])(lm_eval_dcpmi(?:\.\w+)+)")
TICKED = re.compile(r"``(_?[a-z]\w*(?:\.\w+)+)``")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()
# a private module's name without its ``_`` -> the modules of that name
LEAVES: dict[str, list[str]] = {}
for _module in MODULES:
    _leaf = _module.rsplit(".", 1)[-1]
    if _leaf.startswith("_") and not _leaf.startswith("__"):
        LEAVES.setdefault(_leaf[1:], []).append(_module)


def top_names(module: str) -> set[str]:
    """What ``module`` defines at its top, and what its package ``__init__`` exports."""
    return top_level_names(MODULES[module])


def resolves(dotted: str) -> bool:
    """``lm_eval_dcpmi.a.b[.name]``: a module, or a module and one name it defines."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in MODULES:
            rest = parts[end:]
            return not rest or (len(rest) == 1 and rest[0] in top_names(module))
    return False


def stale(text: str, own_package: str | None = None, docstring: bool = True) -> list[str]:
    """The references of ``text`` that name nothing (``own_package``: the docstring's)."""
    found = []
    for match in DOTTED.finditer(text):
        if not resolves(match[1].rstrip(".")):
            found.append(match[1])
    for match in PATH.finditer(text):
        path = match[1].rstrip("./")
        if "*" in path or "<" in path or path.startswith("lm_eval_dcpmi/task_configs"):
            continue
        if not (ROOT / path).exists() and not (ROOT / f"{path}.py").exists():
            found.append(path)
    if not docstring:
        return found
    packages = {m.split(".")[1] for m in MODULES if m.count(".") >= 1}
    for match in TICKED.finditer(text):
        token = match[1]
        first, second = token.split(".")[:2]
        if first in RETIRED:
            found.append(token)
        elif first in packages and (second.startswith("_") or second in OLD_MODULES):
            if not resolves(f"{PACKAGE}.{token}"):
                found.append(token)
        elif first.startswith("_") and own_package and f"{own_package}.{first}" in MODULES:
            if not resolves(f"{own_package}.{token}"):
                found.append(token)
        elif token.count(".") == 1 and any(second in top_names(m) for m in LEAVES.get(first, ())):
            found.append(token)  # a module's old name: now ``_x.name`` or ``package._x.name``
    return found


def docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                found.append((getattr(node, "lineno", 1), text))
    return found


def python_files() -> list[Path]:
    files = [*MODULES.values(), ROOT / "lm_eval_dcpmi_autoload.py"]
    for folder in ("scripts", "benchmarks", "tests"):
        files += sorted((ROOT / folder).glob("*.py"))
    return [path for path in files if path.name != "test_docstrings.py"]  # its examples


def test_the_checker_finds_what_it_looks_for():
    made_up = (
        "See ``tasks.layout`` and ``rules.scoring`` (``provenance``), lm_eval_dcpmi.nowhere, "
        "lm_eval_dcpmi/nowhere.py, lm_eval_dcpmi.rules.NO_SUCH_NAME and ``_gone.x``; but "
        "``rules._scoring.METRICS``, lm_eval_dcpmi.task.DCPMITask, ``task.config.metadata`` "
        "and tests/test_docstrings.py are there; ``scoring.METRICS`` is an old name."
    )
    assert stale(made_up, "lm_eval_dcpmi.rules") == [
        "lm_eval_dcpmi.nowhere",
        "lm_eval_dcpmi.rules.NO_SUCH_NAME",
        "lm_eval_dcpmi/nowhere.py",
        "tasks.layout",
        "rules.scoring",
        "scoring.METRICS",
    ]


def test_every_module_path_and_name_a_docstring_names_exists():
    found = []
    for path in python_files():
        rel = path.relative_to(ROOT)
        module = ".".join(rel.with_suffix("").parts)
        own = module.removesuffix(".__init__") if path.name == "__init__.py" else None
        own = own or (module.rsplit(".", 1)[0] if module.startswith(PACKAGE) else None)
        for line, text in docstrings(path):
            found += [f"{rel}:{line}: {ref}" for ref in stale(text, own)]
    assert found == []


# A file named bare (``paper.py``, ``test.sh``): some file of the checkout has that name.
BARE = re.compile(r"(?<![\w./-])(\w[\w-]*\.(?:py|sh))\b")
PLACEHOLDERS = {"_x.py"}  # docs/development.md's example of a private module
# What a script makes, git-ignored, that the pages name: benchmarks/device_prepare.sh's
# output, which a GPU call carries (docs/performance.md); a clean checkout has none of it.
MADE_BY_SCRIPTS = {
    "benchmarks/device/wheels", "benchmarks/device/tokenizer", "benchmarks/device/COMMIT",
}  # fmt: skip
# What the Unreleased changes record as moved, retired or gone (the names they had).
RETIRED_NAMES = {
    "lm_eval_dcpmi.leaderboard", "lm_eval_dcpmi.tasks", "lm_eval_dcpmi.harness",
    "docs/results", "docs/benchmarks", "lm_eval_dcpmi/core", "scripts/evaluate_tasks.py",
    "lm_eval_dcpmi/report/pages.py", "benchmarks/bench_dcpmi.py",
}  # fmt: skip


def checkout_names() -> set[str]:
    """The names of the checkout's files and folders (hidden folders, e.g. ``.venv``, apart)."""
    names = set()
    for _folder, folders, files in os.walk(ROOT):
        folders[:] = [f for f in folders if not f.startswith((".", "__pycache__"))]
        names.update(folders, files)
    return names


def stale_in_text(text: str, names: set[str], bare: bool = True) -> list[str]:
    """``stale`` for prose (paths, dotted modules) and, with ``bare``, bare file names."""
    found = stale(text, docstring=False)
    if bare:
        found += [m for m in BARE.findall(text) if m not in names and m not in PLACEHOLDERS]
    return found


def pyproject_comments() -> str:
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    return "\n".join(line.split("#", 1)[1] for line in lines if "#" in line)


def unreleased_changes() -> str:
    """The CHANGELOG's Unreleased section; the released history keeps the names it had."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


def test_the_page_checker_finds_a_made_up_name():
    names = checkout_names()
    made_up = "See scripts/nowhere.sh, results/benchmarks/none.md, `paper.py` and `test.sh`."
    assert stale_in_text(made_up, names) == [
        "scripts/nowhere.sh", "results/benchmarks/none.md", "paper.py",
    ]  # fmt: skip


def test_every_module_path_and_name_a_page_names_exists():
    """README.md, docs/*.md, pyproject.toml's comments and the CHANGELOG's Unreleased
    section: every path, ``lm_eval_dcpmi.`` module and file name they write exists."""
    names = checkout_names()
    texts = {
        str(page.relative_to(ROOT)): page.read_text(encoding="utf-8")
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    }
    texts["pyproject.toml (comments)"] = pyproject_comments()
    found = []
    for where, text in texts.items():
        found += [
            f"{where}: {ref}" for ref in stale_in_text(text, names) if ref not in MADE_BY_SCRIPTS
        ]
    # Unreleased names things as they are now, but for what it records as moved or gone
    # (bare names there are a module's old name beside its move: not checked).
    for ref in stale_in_text(unreleased_changes(), names, bare=False):
        if ref not in RETIRED_NAMES | MADE_BY_SCRIPTS:
            found.append(f"CHANGELOG.md [Unreleased]: {ref}")
    assert found == []


def test_each_package_docstring_names_its_modules():
    found = {}
    for package, path in MODULES.items():
        if path.name != "__init__.py" or package == PACKAGE:
            continue
        own = {m.rsplit(".", 1)[1] for m in MODULES if m.rsplit(".", 1)[0] == package}
        text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        named = set(re.findall(r"``(_[a-z]\w*)``", text))
        if named != own:
            found[package] = {"not named": sorted(own - named), "gone": sorted(named - own)}
    assert found == {}
