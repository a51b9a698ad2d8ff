"""The test suite's own rules (no model, no data): the test files share helpers through
helpers.py and report_helpers.py, never by importing one another or conftest.py (which
holds the fixtures); the fast tier's marker is registered."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path) -> set[str]:
    """The top-level module names a file imports, at any level (functions included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_file_imports_another_test_file_or_conftest():
    wrong = {}
    for path in sorted(TESTS.glob("*.py")):
        modules = imported_modules(path)
        wrong[path.name] = sorted(m for m in modules if m.startswith("test_") or m == "conftest")
    assert {name: modules for name, modules in wrong.items() if modules} == {}, (
        "move what is shared into tests/helpers.py or tests/report_helpers.py"
    )


def test_the_fast_marker_is_registered(pytestconfig):
    assert any(marker.startswith("fast:") for marker in pytestconfig.getini("markers"))
