#!/usr/bin/env bash
# hf and hf-prefix on one GPU, in one command of under 8 minutes: a ~1B (Llama 3.2 1B) and an
# ~8B (Llama 3.1 8B) random-weight configuration on CUDA in bf16, the 1B one also against its
# fp32 answers; records exactness, tokens/s, peak GPU memory and --batch_size auto's choice in
# $OUT_DIR (default results/benchmarks): sizes_device.json and .md (benchmarks/bench_sizes.py).
#
#   benchmarks/device_check.sh [--tiny] [--out DIR]
#
# The GPU image has Python 3.12, PyTorch and transformers, but no lm-eval and no network:
# where lm_eval does not import, the script installs benchmarks/device/wheels into a folder of
# its own, and reads the tokenizer from benchmarks/device/tokenizer (benchmarks/device_prepare.sh
# fills both, here). The requests are made-up text of RACE-H's and HellaSwag's shape (the data
# stays here). --tiny: a 2-layer Llama in bf16 on the CPU, batch size 4, in about a minute:
# what CI runs, so that this script cannot rot. Without --tiny where torch sees no GPU, it
# says so in one line and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
tiny=0
out=${OUT_DIR:-results/benchmarks}
while [ $# -gt 0 ]; do
  case $1 in
    --tiny) tiny=1 ;;
    --out) out=$2; shift ;;
    *) echo "device_check: unknown option $1 (--tiny, --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
python=${DCPMI_PYTHON:-python3}
if [ -x .venv/bin/python ] && [ -z "${DCPMI_PYTHON:-}" ]; then python=.venv/bin/python; fi
if [ "$tiny" = 0 ]; then  # before anything is installed: a GPU, or one line saying so
  gpu=0
  "$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)" \
    2>/dev/null || gpu=$?
  if [ "$gpu" = 3 ]; then
    echo "device_check: this check needs a GPU and torch sees none here: run it on a GPU" \
      "machine, or pass --tiny for the CPU run" >&2
    exit 2
  elif [ "$gpu" != 0 ]; then
    echo "device_check: $python cannot import torch: set DCPMI_PYTHON to a Python with" \
      "PyTorch" >&2
    exit 2
  fi
fi
if ! "$python" -c "import lm_eval" 2>/dev/null; then
  if ! ls benchmarks/device/wheels/*.whl >/dev/null 2>&1; then
    echo "device_check: lm_eval does not import and benchmarks/device/wheels is empty:" \
      "run benchmarks/device_prepare.sh where PyPI is reachable, and carry benchmarks/device" >&2
    exit 2
  fi
  site=${TMPDIR:-/tmp}/dcpmi-device-site
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" benchmarks/device/wheels/*.whl
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
# The plugin from this checkout, installed or not (the GPU machine has only the tree).
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
tokenizer=()
if [ -f benchmarks/device/tokenizer/tokenizer.json ]; then
  tokenizer=(--tokenizer benchmarks/device/tokenizer)
fi
if [ "$tiny" = 1 ]; then
  run=(--configs tiny-llama --device cpu --batch-size 4 --race 1 --hellaswag 1 --label tiny)
else
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  run=(--configs llama-3.2-1b-bf16,llama-3.1-8b --device cuda --batch-size auto --label device)
fi
"$python" benchmarks/bench_sizes.py "${run[@]}" "${tokenizer[@]}" --requests synthetic \
  --out "$out"
