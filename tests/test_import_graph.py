"""The package's modules import each other without a cycle (no model, no data).

Every module of ``lm_eval_dcpmi`` and the start-up module ``lm_eval_dcpmi_autoload.py`` is
parsed with ``ast``; every import counts, at module level or inside a function (and under
``TYPE_CHECKING``). ``from a import b`` imports ``a.b`` when ``b`` is a submodule of ``a``,
else ``a``; importing ``a.b`` is not counted as importing ``a``'s ``__init__``.

    python tests/test_import_graph.py [REPOSITORY]   # check another checkout's tree
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

# Every test here needs neither the model nor the data: the fast tier.
pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lm_eval_dcpmi"
TOP_LEVEL = ["lm_eval_dcpmi_autoload"]  # the module the start-up .pth imports


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for the package and the top-level start-up module."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    for name in TOP_LEVEL:
        found[name] = root / f"{name}.py"
    return found


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The names of the modules one import statement imports (ours or not)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the module's own package, up level - 1
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    names = []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        names.append(submodule if submodule in known else base)
    return names


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the package's modules it imports; and the imports of ours naming no module."""
    found = modules(root)
    known = set(found)
    graph: dict[str, set[str]] = {name: set() for name in found}
    unknown = []
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package, known):
                ours = target == PACKAGE or target.startswith(f"{PACKAGE}.")
                if target in known:
                    if target != name:
                        graph[name].add(target)
                elif ours or target in TOP_LEVEL:
                    unknown.append(f"{path.relative_to(root)}:{node.lineno}: {target}")
    return graph, unknown


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def test_no_import_cycle():
    graph, _ = import_graph(ROOT)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The package's parts, lowest first: a module imports its own part's modules and those of
# the parts below its part, never one above (an arrow back up). A part is a subpackage or a
# top-level module; development.md's map shows the same order.
LAYERS = (
    "lm_eval_dcpmi",  # __init__: task_configs_dir, __version__
    "lm_eval_dcpmi.errors",
    "lm_eval_dcpmi.json_files",
    "lm_eval_dcpmi.embedded",
    "lm_eval_dcpmi.paper",
    "lm_eval_dcpmi.harness",  # the one seam to lm-eval's internals
    "lm_eval_dcpmi.data",
    "lm_eval_dcpmi.rules",
    "lm_eval_dcpmi.tasks",
    "lm_eval_dcpmi.hf_prefix",
    "lm_eval_dcpmi.report",
    "lm_eval_dcpmi.leaderboard",
    "lm_eval_dcpmi._autoload",
    "lm_eval_dcpmi_autoload",  # what the start-up .pth imports
    "lm_eval_dcpmi.cli",
    "lm_eval_dcpmi.__main__",
    "lm_eval_dcpmi.task",  # the class path the YAMLs name
)


def part_of(module: str) -> str:
    """The part (of ``LAYERS``) a module belongs to: the longest one naming it or a parent."""
    parts = [p for p in LAYERS if module == p or module.startswith(f"{p}.")]
    assert parts, f"{module} belongs to no part of LAYERS: add its part there"
    return max(parts, key=len)


def arrows_up(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for each import of a module of a higher part (or one not in ``LAYERS``)."""
    rank = {part: i for i, part in enumerate(LAYERS)}
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if rank[part_of(target)] > rank[part_of(module)]:
                found.append(f"{module} -> {target}")
    return found


def test_no_import_points_back_up():
    graph, _ = import_graph(ROOT)
    assert arrows_up(graph) == []
    assert {part_of(m) for m in graph} == set(LAYERS)  # every part still holds a module
    # the check finds what it looks for
    assert arrows_up({"lm_eval_dcpmi.rules.scoring": {"lm_eval_dcpmi.tasks.tokens"}}) == [
        "lm_eval_dcpmi.rules.scoring -> lm_eval_dcpmi.tasks.tokens"
    ]


def test_module_names_do_not_repeat():
    # A name says what a module or subpackage is, once in the package. The one exception is
    # a subcommand's module, cli/<subcommand>.py, named for the command it runs (the work
    # is done where the other module of that name is).
    from lm_eval_dcpmi.cli import SUBCOMMANDS

    leaves: dict[str, list[str]] = {}
    for module in modules(ROOT):
        if module.startswith(f"{PACKAGE}."):
            leaves.setdefault(module.rsplit(".", 1)[-1], []).append(module)
    subcommands = {f"{PACKAGE}.cli.{command.name}" for command in SUBCOMMANDS}
    repeated = {
        name: found
        for name, found in leaves.items()
        if len([m for m in found if m not in subcommands]) > 1
    }
    assert repeated == {}
    assert set(leaves["verify"]) == {f"{PACKAGE}.cli.verify", f"{PACKAGE}.leaderboard.verify"}


def test_every_import_of_ours_names_a_module():
    _, unknown = import_graph(ROOT)
    assert not unknown, "imports naming no module of the package:\n" + "\n".join(unknown)


def script_graph(root: Path) -> dict[str, set[str]]:
    """``benchmarks/`` and ``scripts/``: each script -> the scripts of its folder it imports
    (a script's folder is on ``sys.path`` when it runs, so they import each other by name)."""
    graph: dict[str, set[str]] = {}
    for folder in ("benchmarks", "scripts"):
        scripts = {path.stem: path for path in sorted((root / folder).glob("*.py"))}
        for stem, path in scripts.items():
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            names = {t for node in ast.walk(tree) for t in _imported(node, stem, False, set())}
            graph[f"{folder}/{stem}"] = {f"{folder}/{n}" for n in names if n in scripts}
    return graph


def test_no_import_cycle_among_the_benchmarks_and_scripts():
    graph = script_graph(ROOT)
    assert "benchmarks/common" in graph["benchmarks/bench_suite"]  # the shared module
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_graph_sees_function_level_and_submodule_imports():
    graph, _ = import_graph(ROOT)
    # _autoload imports derive inside a function; lm_eval_dcpmi_autoload imports _autoload
    # inside one too, as `from lm_eval_dcpmi import _autoload` (a submodule)
    assert "lm_eval_dcpmi.tasks.derive" in graph["lm_eval_dcpmi._autoload"]
    assert "lm_eval_dcpmi._autoload" in graph["lm_eval_dcpmi_autoload"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


if __name__ == "__main__":
    graph, unknown = import_graph(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    cycle = find_cycle(graph)
    print("import cycle: " + " -> ".join(cycle) if cycle else "no import cycle")
    print("\n".join(unknown) or "every import of ours names a module")
    sys.exit(1 if cycle or unknown else 0)
