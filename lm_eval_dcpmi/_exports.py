"""A package's public names, each imported from its private module on first use (PEP 562).

Importing a package then costs what importing the module of the name used costs: the
start-up hook runs inside lm-eval's own imports, and ``dcpmi tasks`` and ``dcpmi report``
import no lm-eval. Standard library only.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map each public
    name to the private module (``_x``, in the package) that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        sys.modules[package].__dict__[name] = value  # the next use is a plain look-up
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
