#!/usr/bin/env bash
# The project's test command: sets everything up on a fresh machine, then lints and tests.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k copa`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
venv=${DCPMI_VENV:-.venv}
export DCPMI_DATA_DIR=${DCPMI_DATA_DIR:-../shared/data}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/python" -m pytest -q "$@"
