#!/usr/bin/env bash
# Fills benchmarks/device/ (ignored by git) with what benchmarks/device_check.sh needs on a
# GPU machine that has Python 3.12, PyTorch and transformers but no lm-eval and no network:
# the wheels of lm-eval and the few packages it imports there that the image lacks, and the
# embedded model's tokenizer as a folder (its GGUF file is too large to travel). Run it here,
# where PyPI is reachable; it prints the size of what travels (at most 64 MiB, the code too).
# DCPMI_DEVICE_PYTHON_VERSION: the machine's Python (default 3.12, the GPU image's).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${DCPMI_PYTHON:-.venv/bin/python}
folder=benchmarks/device
rm -rf "$folder/wheels"
mkdir -p "$folder/wheels"
# What `lm_eval.models.huggingface` and the plugin's hf-prefix import beyond torch,
# transformers and accelerate: device_check.sh, run with an image-like Python
# (DCPMI_PYTHON), fails at the first import these miss.
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version "${DCPMI_DEVICE_PYTHON_VERSION:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$folder/wheels" \
    "lm-eval==$("$python" -c 'import importlib.metadata as m; print(m.version("lm-eval"))')" \
    dill jinja2 markupsafe requests urllib3 idna charset-normalizer certifi
"$python" - "$folder/tokenizer" <<'PYTHON'
import sys

sys.path.insert(0, "benchmarks")
from published_configs import load_tokenizer

load_tokenizer(None).save_pretrained(sys.argv[1])
PYTHON
tracked=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
extra=$(du -sb "$folder" | cut -f1)
echo "device_prepare: $folder: $((extra / 1024 / 1024)) MiB; with the tracked tree" \
    "$(((tracked + extra) / 1024 / 1024)) MiB of the 64 MiB that travel"
