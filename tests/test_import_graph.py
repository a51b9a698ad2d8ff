"""The package's modules import each other without a cycle (no model, no data).

Every module of ``lm_eval_dcpmi`` and the start-up module ``lm_eval_dcpmi_autoload.py`` is
parsed with ``ast``; every import counts, at module level or inside a function (and under
``TYPE_CHECKING``). ``from a import b`` imports ``a.b`` when ``b`` is a submodule of ``a``,
``a._m`` when ``a``'s ``__init__`` exports ``b`` from its private module ``_m``
(``_EXPORTS``: the package loads it on first use), else ``a``; importing ``a.b`` is not
counted as importing ``a``'s ``__init__``.

    python tests/test_import_graph.py [REPOSITORY]   # check another checkout's tree
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from helpers import top_level_names

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


def package_exports(root: Path) -> dict[str, dict[str, str]]:
    """Package -> its ``_EXPORTS`` (public name -> private module), read from the AST of
    each ``__init__.py`` of the package."""
    found = {}
    for name, path in modules(root).items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if targets == ["_EXPORTS"]:
                found[name] = ast.literal_eval(node.value)
    return found


def _imported(
    node: ast.AST,
    module: str,
    is_package: bool,
    known: set[str],
    exports: dict[str, dict[str, str]] | None = None,
) -> list[str]:
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
        exported = (exports or {}).get(base, {}).get(alias.name)
        if submodule not in known and exported is not None:
            submodule = f"{base}.{exported}"
        names.append(submodule if submodule in known else base)
    return names


def import_graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the package's modules it imports; and the imports of ours naming no module."""
    found = modules(root)
    known = set(found)
    exports = package_exports(root)
    graph: dict[str, set[str]] = {name: set() for name in found}
    unknown = []
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            for target in _imported(node, name, is_package, known, exports):
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
    "lm_eval_dcpmi._exports",  # the packages' lazy public names
    "lm_eval_dcpmi.errors",
    "lm_eval_dcpmi._json_files",
    "lm_eval_dcpmi.embedded",
    "lm_eval_dcpmi._paper",
    "lm_eval_dcpmi.data",
    "lm_eval_dcpmi._identity",
    "lm_eval_dcpmi._harness",  # the one seam to lm-eval's internals
    "lm_eval_dcpmi.rules",
    "lm_eval_dcpmi.task",  # DCPMITask, the class path the YAMLs name, and its parts
    "lm_eval_dcpmi.hf_prefix",
    "lm_eval_dcpmi.report",
    "lm_eval_dcpmi.verification",
    "lm_eval_dcpmi.export",
    "lm_eval_dcpmi.merging",
    "lm_eval_dcpmi._autoload",
    "lm_eval_dcpmi_autoload",  # what the start-up .pth imports
    "lm_eval_dcpmi.cli",
    "lm_eval_dcpmi.__main__",
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
    assert arrows_up({"lm_eval_dcpmi.rules._scoring": {"lm_eval_dcpmi.task._tokens"}}) == [
        "lm_eval_dcpmi.rules._scoring -> lm_eval_dcpmi.task._tokens"
    ]


def test_module_names_do_not_repeat():
    # A name says what a module is, once in the package (a private module's leading `_`
    # aside). The one exception is a subcommand's module, cli/_<subcommand>.py, named for the
    # command it runs (the work is done where the other module of that name is); a package's
    # own module may carry its name (export/_export.py).
    from lm_eval_dcpmi.cli import SUBCOMMANDS

    found = modules(ROOT)
    leaves: dict[str, list[str]] = {}
    for module, path in found.items():
        if module.startswith(f"{PACKAGE}.") and path.name != "__init__.py":
            leaves.setdefault(module.rsplit(".", 1)[-1].lstrip("_"), []).append(module)
    subcommands = {f"{PACKAGE}.cli._{command.name}" for command in SUBCOMMANDS}
    repeated = {
        name: found
        for name, found in leaves.items()
        if len([m for m in found if m not in subcommands]) > 1
    }
    assert repeated == {}
    assert set(leaves["verify"]) == {f"{PACKAGE}.cli._verify", f"{PACKAGE}.verification._verify"}


def owner_of(module: str) -> str | None:
    """The package a private module (one with a ``_x`` part) belongs to: the part before its
    last private name; None for a public module."""
    parts = module.split(".")
    private = [i for i, part in enumerate(parts) if part.startswith("_") and part[:2] != "__"]
    return ".".join(parts[: private[-1]]) if private else None


def private_imports(files: dict[str, Path], known: set[str]) -> list[str]:
    """``file:line: importer -> module`` for each import that names a private module from
    outside the package it belongs to (``files``: importer -> file)."""
    found = []
    for importer, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for target in _imported(node, importer, path.name == "__init__.py", known):
                owner = owner_of(target)
                inside = owner is not None and (importer + ".").startswith(owner + ".")
                companion = importer in TOP_LEVEL and target == f"{PACKAGE}._autoload"
                if owner is not None and target.startswith(PACKAGE) and not inside:
                    if not companion:
                        found.append(f"{path.name}:{node.lineno}: {importer} -> {target}")
    return found


def test_private_modules_are_imported_only_inside_their_package(tmp_path):
    """A module named ``_x`` is its package's own: the rest of the plugin, and the dataset
    folders' code (task_configs/, shipped in the wheel), import the names the package's
    ``__init__`` exports. Only the checkout's own tools, tests/, scripts/ and benchmarks/,
    reach into private modules."""
    found = modules(ROOT)
    outside = {
        f"task_configs.{path.relative_to(ROOT / 'task_configs').with_suffix('')}".replace(
            "/", "."
        ): path
        for path in sorted((ROOT / "task_configs").rglob("*.py"))
    }
    assert len(outside) > 10
    assert private_imports({**found, **outside}, set(found)) == []
    # the check finds what it looks for
    planted = tmp_path / "fixtures_import_graph.py"
    planted.write_text("from lm_eval_dcpmi.rules._scoring import METRICS\n"
                       "from lm_eval_dcpmi.rules import METRICS, _layout\n")  # fmt: skip
    assert private_imports({"lm_eval_dcpmi.report._tables": planted}, set(found)) == [
        "fixtures_import_graph.py:1: lm_eval_dcpmi.report._tables -> lm_eval_dcpmi.rules._scoring",
        "fixtures_import_graph.py:2: lm_eval_dcpmi.report._tables -> lm_eval_dcpmi.rules._layout",
    ]
    assert private_imports({"lm_eval_dcpmi.rules._registry": planted}, set(found)) == []


def test_each_package_exports_what_its_modules_define():
    """Every name of a package's ``_EXPORTS`` is defined at the top of the private module it
    names (a class, function, assignment or import there), and ``__all__`` lists them."""
    exports = package_exports(ROOT)
    assert {"lm_eval_dcpmi.task", "lm_eval_dcpmi.rules", "lm_eval_dcpmi._harness"} <= set(exports)
    found = modules(ROOT)
    for package, names in exports.items():
        for name, module in names.items():
            defined = top_level_names(found[f"{package}.{module}"])
            assert name in defined, f"{package}: {name} is not defined in {module}"


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
    assert "lm_eval_dcpmi.task._derive" in graph["lm_eval_dcpmi._autoload"]
    assert "lm_eval_dcpmi._autoload" in graph["lm_eval_dcpmi_autoload"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


if __name__ == "__main__":
    graph, unknown = import_graph(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    cycle = find_cycle(graph)
    print("import cycle: " + " -> ".join(cycle) if cycle else "no import cycle")
    print("\n".join(unknown) or "every import of ours names a module")
    sys.exit(1 if cycle or unknown else 0)


def test_the_docs_list_exactly_the_public_names():
    """docs/harness.md's "The plugin's public names" lists, per public package or module,
    exactly its ``__all__`` (read from the source: a literal list, or ``_EXPORTS``'s keys)."""
    text = (ROOT / "docs" / "harness.md").read_text(encoding="utf-8")
    section = text.split("### The plugin's public names\n", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in section.splitlines():
        if line.startswith("- `"):
            name, _, names = line[3:].partition("`")
            listed[name] = set(re.findall(r"`([^`]+)`", names.partition(":")[2]))
    exports = package_exports(ROOT)
    public = {}
    candidates = {
        module: path
        for module, path in modules(ROOT).items()
        if owner_of(module) is None and module not in TOP_LEVEL and not module.endswith("__main__")
    }
    for module, path in candidates.items():
        if module in exports:
            public[module] = set(exports[module])
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if targets == ["__all__"]:
                public[module] = set(ast.literal_eval(node.value))
    assert set(public) == set(candidates)  # every public module says what it offers
    assert listed == public
