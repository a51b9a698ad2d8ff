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
# The data: $DCPMI_DATA_DIR if set, else ../shared/data where it exists, else no folder at
# all: COPA is then read from the copy the package ships (no download, no network).
if [ -z "${DCPMI_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  export DCPMI_DATA_DIR=../shared/data
fi
if [ -n "${DCPMI_DATA_DIR:-}" ]; then
  export DCPMI_DATA_DIR
  from="the data folder $DCPMI_DATA_DIR (DCPMI_DATA_DIR)"
else
  unset DCPMI_DATA_DIR
  from="the copy shipped in the package (no data folder: DCPMI_DATA_DIR unset, no ../shared/data)"
fi
rm -rf out/demo
echo "demo: scoring COPA's documents from $from (the model loads first; the table" \
  "comes at the end)"
"$venv/bin/dcpmi" run --tasks dcpmi_copa --log_samples --output_path out/demo "$@"
echo "demo: results and samples are in out/demo/; next: $venv/bin/dcpmi report out/demo/ --out report/"
