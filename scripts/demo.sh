#!/usr/bin/env bash
# Sets up, then runs DC-PMI on COPA with the embedded SmolLM2-135M (no network needed).
# Extra arguments go to `dcpmi run` / lm-eval (e.g. `scripts/demo.sh --limit 50`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
venv=${DCPMI_VENV:-.venv}
export DCPMI_DATA_DIR=${DCPMI_DATA_DIR:-../shared/data}
exec "$venv/bin/dcpmi" run --tasks dcpmi_copa "$@"
