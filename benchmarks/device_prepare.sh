#!/usr/bin/env bash
# Fills benchmarks/device/ (ignored by git) with what benchmarks/device_check.sh needs on a
# GPU machine that has Python 3.12, PyTorch and transformers but no lm-eval, no network and
# perhaps no git: the wheels of lm-eval and the few packages it imports there that the image
# lacks, the embedded model's tokenizer as a folder (its GGUF file is too large to travel),
# and COMMIT, this checkout's commit for the record (+changes where tracked files differ).
# Run it here, in the git checkout, where PyPI is reachable; it prints the size of what
# travels and refuses a total over the 64 MiB a call carries. Then the GPU call carries
# benchmarks/device (device_check.sh's header has the one command line).
# DCPMI_DEVICE_PYTHON_VERSION: the machine's Python (default 3.12, the GPU image's).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${DCPMI_PYTHON:-.venv/bin/python}
folder=benchmarks/device
rm -rf "$folder/wheels"
mkdir -p "$folder/wheels"
# What `lm_eval.models.huggingface` and the plugin's hf-prefix import beyond torch,
# transformers and accelerate: device_check.sh in the image's CPU twin
# (tests/test_device_twin.py) fails at the first import these miss.
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
# Where git is: the machine's record names the commit from this file (common.checkout_commit).
if ! commit=$(git rev-parse --short HEAD 2>/dev/null); then
  echo "device_prepare: git cannot name this checkout's commit: run it in the project's git" \
    "checkout" >&2
  exit 2
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then commit=$commit+changes; fi
echo "$commit" >"$folder/COMMIT"
# What a call sends: the tracked and the untracked-but-not-ignored files, and this folder.
git ls-files -z --cached --others --exclude-standard | "$python" -c '
import os, sys
from pathlib import Path

names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
tree = sum(os.path.getsize(n) for n in names if os.path.isfile(n))
folder = sys.argv[1]
carried = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
wheels = sum(p.stat().st_size for p in Path(folder, "wheels").glob("*.whl"))
mib = 2**20
print(f"device_prepare: {folder}: {carried / mib:.1f} MiB ({wheels / mib:.1f} MiB of wheels);"
      f" with the tree ({tree / mib:.1f} MiB) {(tree + carried) / mib:.1f} MiB of the 64 MiB"
      f" a call carries; commit {sys.argv[2]}")
if tree + carried > 64 * mib:
    print(f"device_prepare: over the 64 MiB a call carries: leave out what the tree does"
          f" not need (git-ignore it), or carry less in {folder}", file=sys.stderr)
    sys.exit(2)
' "$folder" "$commit"
