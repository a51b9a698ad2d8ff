#!/usr/bin/env bash
# Creates .venv (or $DCPMI_VENV) and installs the plugin with its test and demo extras.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DCPMI_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# CPU build of torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q -e '.[test]'
