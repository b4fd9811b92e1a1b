"""Token streams and windows.

`tokens.safetensors` (written by `paperflow quantization data`): int32 1-D tensors `train`,
`valid`, `test` — each split's text (paperflow.lm.corpus.read_split, WikiText raw or C4 jsonl
layout) tokenized with the target model's tokenizer, no special tokens. Windows are cut at use
time, deterministically:
  test / valid  consecutive non-overlapping windows of seq_len from the start of the split
  calib / lac   `calib_windows` / `lac_windows` random train windows, seeded by (seed, "calib"/"lac")
Only train and valid feed any decision (calibration, LAC, ILA-AMP sweep); test only feeds q_eval.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from paperflow.core.checkpoint import save_safetensors
from paperflow.core.seeding import stream
from paperflow.lm.corpus import read_split


def build_tokens(corpus_dir: str | Path, fmt: str, model_dir: str | Path, out: str | Path) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tensors, stats = {}, {}
    for split in ("train", "valid", "test"):
        text = read_split(corpus_dir, split, fmt)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        tensors[split] = torch.tensor(ids, dtype=torch.int32)
        stats[split] = {"chars": len(text), "tokens": len(ids)}
    save_safetensors(tensors, out, {"tokenizer": str(model_dir)})
    return stats


def load_tokens(path: str | Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def consecutive(stream_ids: torch.Tensor, seq_len: int, n: int | None) -> torch.Tensor:
    k = len(stream_ids) // seq_len
    if n is not None:
        if n > k:
            raise ValueError(f"asked for {n} windows of {seq_len} tokens, split has {k}")
        k = n
    return stream_ids[: k * seq_len].reshape(k, seq_len).to(torch.int64)


def random_windows(stream_ids: torch.Tensor, seq_len: int, n: int, seed: int, key: str) -> torch.Tensor:
    rng = stream(seed, key)
    starts = rng.integers(0, len(stream_ids) - seq_len, size=n)
    return torch.stack([stream_ids[s:s + seq_len] for s in np.asarray(starts)]).to(torch.int64)


def windows(tokens: dict[str, torch.Tensor], d: dict, kind: str, seed: int = 0) -> torch.Tensor:
    T = d["seq_len"]
    if kind == "test":
        return consecutive(tokens["test"], T, d["test_windows"])
    if kind == "sens":
        return consecutive(tokens["valid"], T, d["sens_windows"])
    if kind == "check":
        return consecutive(tokens["valid"], T, d["check_windows"])
    if kind == "calib":
        return random_windows(tokens["train"], T, d["calib_windows"], seed, "calib")
    if kind == "lac":
        return random_windows(tokens["train"], T, d["lac_windows"], seed, "lac")
    raise ValueError(kind)
