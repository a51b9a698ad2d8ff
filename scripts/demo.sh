#!/usr/bin/env bash
# Sets up, then runs DC-PMI on COPA with the embedded SmolLM2-135M (no network but PyPI).
# Extra arguments go to `dcpmi run` / lm-eval (e.g. `scripts/demo.sh --quick 50`).
# The results file and per-document samples go to out/demo/ (git-ignored; an earlier
# demo's are replaced), ready for `dcpmi report out/demo/ --out report/`.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DCPMI_VENV:-.venv}
echo "demo: set-up (scripts/setup.sh): minutes the first time, seconds after"
scripts/setup.sh
export DCPMI_DATA_DIR=${DCPMI_DATA_DIR:-../shared/data}
rm -rf out/demo
echo "demo: scoring COPA's documents from $DCPMI_DATA_DIR (the model loads first; the table" \
  "comes at the end)"
"$venv/bin/dcpmi" run --tasks dcpmi_copa --log_samples --output_path out/demo "$@"
echo "demo: results and samples are in out/demo/; next: $venv/bin/dcpmi report out/demo/ --out report/"
