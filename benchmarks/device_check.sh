#!/usr/bin/env bash
# hf and hf-prefix on one GPU, in one command: a ~1B (Llama 3.2 1B) and an ~8B (Llama 3.1 8B)
# random-weight configuration on CUDA in bf16, the 1B one also against its fp32 answers, at
# --batch_size auto; records exactness, tokens/s, peak GPU memory and auto's choice in
# sizes_device.json and .md (benchmarks/bench_sizes.py), with this script's log beside them.
#
# On the GPU machine (docs/performance.md, "On a GPU machine"), this one line:
#
#   bash benchmarks/device_check.sh --out "$OUT"
#
# - First, here, where PyPI and git are: benchmarks/device_prepare.sh. It fills
#   benchmarks/device/ (git-ignored but for its README, so it travels only when named): the
#   wheels of lm-eval and of the few packages it imports that the image lacks, the embedded
#   model's tokenizer, and COMMIT, the checkout's commit (the machine may have no git and
#   gets no .git). It prints what travels: 13 MiB of wheels and tokenizer beside the ~11 MiB
#   tree, of the 64 MiB.
# - The call carries its three ignored paths (the folder's README is tracked):
#   carry ["benchmarks/device/wheels", "benchmarks/device/tokenizer", "benchmarks/device/COMMIT"];
#   no other ignored path is needed (no
#   .venv: the image's python3, /opt/torch/.venv/bin/python3, has torch and transformers).
# - The wheels install with the image's pip, --no-index, into a new temporary folder
#   (mktemp -d under $TMPDIR) put first on PYTHONPATH, not into /opt/torch/.venv, which may be
#   read-only; the plugin is imported from the tree, not installed.
# - Results go under $OUT, three files at its top (sizes_device.json, sizes_device.md,
#   device_check.log): only what is under $OUT comes back. The JSON is written after each
#   configuration, so a run cut short still brings back the 1B one.
# - It ends in about 5 minutes, within 8 (give the call timeout_s 600): mostly saving 19 GB
#   of weights and loading them, six Python start-ups and auto's probes, the scoring itself
#   seconds (docs/performance.md, "On a GPU machine", has the estimate).
#
#   benchmarks/device_check.sh [--tiny] [--out DIR]     (--out default: results/benchmarks)
#
# The requests are made-up text of RACE-H's and HellaSwag's shape (the data stays here).
# --tiny: a 2-layer Llama in bf16 on the CPU at batch size auto (at most 2), in about two
# minutes: what tests/test_device_twin.py runs, with this same line, in a CPU twin of the
# image (scripts/setup-device-twin.sh), and tests/test_bench_sizes.py in .venv, so that this
# script cannot rot. Without --tiny where torch sees no GPU, it says so in one line, exits 2.
# DCPMI_PYTHON: the Python to run (default .venv/bin/python where there is one, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
tiny=0
out=${OUT_DIR:-results/benchmarks}
while [ $# -gt 0 ]; do
  case $1 in
    --tiny) tiny=1 ;;
    --out)
      if [ $# -lt 2 ] || [ -z "$2" ]; then
        echo "device_check: --out needs a folder (on the GPU machine: --out \"\$OUT\")" >&2
        exit 2
      fi
      out=$2; shift ;;
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
      "run benchmarks/device_prepare.sh where PyPI is reachable, and carry what it made" \
      "(run's carry: [\"benchmarks/device/wheels\", \"benchmarks/device/tokenizer\"," \
      "\"benchmarks/device/COMMIT\"])" >&2
    exit 2
  fi
  # A new folder each run: nothing of an earlier run's install is reused by mistake.
  site=$(mktemp -d "${TMPDIR:-/tmp}/dcpmi-device-site.XXXXXX")
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --target "$site" benchmarks/device/wheels/*.whl
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
# The plugin from this checkout, installed or not (the GPU machine has only the tree).
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
mkdir -p "$out"
# The whole log beside the record: the call's reply keeps only the end of the output.
exec > >(tee "$out/device_check.log") 2>&1
tokenizer=()
if [ -f benchmarks/device/tokenizer/tokenizer.json ]; then
  tokenizer=(--tokenizer benchmarks/device/tokenizer)
fi
if [ "$tiny" = 1 ]; then
  # auto as on the GPU, capped: its probe is five passes of that many rows of the longest
  # request (~1,650 tokens) with their logits, 64 rows ~10 GB here; 2 rows take ~45 s on 2 cores.
  run=(--configs tiny-llama --device cpu --batch-size auto --max-batch-size 2 --race 1
       --hellaswag 1 --label tiny)
else
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  run=(--configs llama-3.2-1b-bf16,llama-3.1-8b --device cuda --batch-size auto --label device)
fi
"$python" benchmarks/bench_sizes.py "${run[@]}" "${tokenizer[@]}" --requests synthetic \
  --out "$out"
echo "device_check: done in $((SECONDS - started)) s; the record is in $out"
