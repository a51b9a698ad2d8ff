"""Save the embedded model (SmolLM2-135M-Instruct, a GGUF file) as an fp32 Hugging Face
folder, which vLLM loads (scripts/setup-vllm.sh makes one for the tests marked `vllm`).

    .venv-vllm/bin/python scripts/embedded_as_hf_folder.py OUT_FOLDER

transformers dequantizes the GGUF file's weights on loading; ``save_pretrained`` refuses
a model loaded from GGUF, so its weights go into a model made from the config first.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lm_eval_dcpmi import embedded


def main(out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, gguf = str(embedded.model_dir()), embedded.GGUF_FILE
    embedded.parse_once()
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=gguf)
    config.__dict__.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(folder, gguf_file=gguf).save_pretrained(out)
    print(f"saved the embedded model as an fp32 folder: {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
