#!/usr/bin/env bash
# The environment of the test marked `device_twin` (tests/test_device_twin.py; scripts/test.sh
# runs it): a CPU twin of the GPU machine's Python, on which benchmarks/device_check.sh must
# pass before a GPU is spent on it. The image (docs/performance.md, "On a GPU machine") has
# Python 3.12, torch 2.11.0, transformers 5.17.0, accelerate 1.15.0, psutil, safetensors,
# tokenizers 0.23 and numpy, and no lm-eval: the twin holds those and nothing else (their own
# requirements aside), so a package the image lacks fails here too. torch 2.11.0 is the
# registry's CUDA build, which runs on the CPU as well (~3 GB to download, 4.9 GB installed:
# 2.5-5 minutes the first time, 15 s after).
# Made once and reused (scripts/kept_environment.sh); safe to run again.
# DCPMI_TWIN_BASE_PYTHON: the Python 3.12 to make it from (default: a pyenv 3.12, python3.12);
# exit status 3 where there is none (scripts/test.sh then skips the twin's test, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DCPMI_TWIN_VENV:-.venv-device-twin}
# The image's versions (docs/performance.md, "On a GPU machine"), resolved together.
requirements=(torch==2.11.0 transformers==5.17.0 accelerate==1.15.0 psutil safetensors
              "tokenizers==0.23.*" numpy)
# Kept outside the checkout, reused by the next clean checkout: keyed by what it holds, so
# that an edit of this file's words keeps it.
. scripts/kept_environment.sh
keep_environment "$venv" "device twin: Python 3.12, ${requirements[*]}"
if [ ! -x "$venv/bin/python" ]; then
  base=${DCPMI_TWIN_BASE_PYTHON:-}
  if [ -z "$base" ]; then
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3 python3.12; do
      if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
        base=$candidate
        break
      fi
    done
  fi
  if [ -z "$base" ]; then
    echo "setup-device-twin: no Python 3.12 here (the GPU image's): install one, or set" \
      "DCPMI_TWIN_BASE_PYTHON to it" >&2
    exit 3
  fi
  echo "setup: creating the GPU machine's twin $venv ($base)"
  "$base" -m venv "$(realpath -m "$venv")"
fi
if ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
  echo "setup: torch 2.11.0 (CUDA build, ~3 GB) and transformers 5.17.0 in $venv; the" \
    "first time a few minutes"
fi
# pip skips them when they are there.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}"
# lm-eval must come from the carried wheels, as on the GPU machine: one installed by hand
# would hide a wheel that benchmarks/device_prepare.sh fails to fetch.
if "$venv/bin/python" -c "import lm_eval" 2>/dev/null; then
  echo "setup-device-twin: lm_eval imports in $venv, which the GPU image lacks: remove the" \
    "environment ($(realpath "$venv")) and run this again" >&2
  exit 2
fi
versions=$("$venv/bin/python" -c 'import sys, torch, transformers as t
print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, transformers {t.__version__}")')
echo "setup: $venv is ready ($versions)"
