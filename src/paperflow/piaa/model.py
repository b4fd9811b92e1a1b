"""The tiny CLIP the method is applied to (the study's only training): a `paperflow.nn.vision.TinyViT`
image tower and a trainable linear map of frozen sentence embeddings (MiniLM-L6, or hashed words in the
smoke profile), trained with the symmetric InfoNCE loss and a learnable temperature. Images that share a
caption in a batch are all positives of each other (multi-positive targets)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from paperflow.nn.vision import TextEncoder, TinyViT, ViTConfig, clip_loss, fit, init_logit_scale

log = logging.getLogger(__name__)
MEAN, STD = 0.5, 0.25  # pixel normalisation of the synthetic and real images alike


class TinyCLIP(nn.Module):
    def __init__(self, vit: Mapping[str, Any], text_dim: int):
        super().__init__()
        self.image = TinyViT(ViTConfig(**vit))
        self.text = TextEncoder(int(vit["embed_dim"]), in_dim=text_dim)
        self.logit_scale = init_logit_scale(0.07)


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 [N, S, S, 3] -> normalised float [N, 3, S, S]."""
    return (torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0 - MEAN) / STD


def device() -> torch.device:
    """CUDA when a GPU is granted (paper scale), else the CPU (tiny and smoke profiles, bit-reproducible)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build(params: Mapping[str, Any], text_dim: int, seed: int) -> TinyCLIP:
    torch.manual_seed(seed)
    return TinyCLIP(params["vit"], text_dim)


def train(params: Mapping[str, Any], images: np.ndarray, cap_idx: np.ndarray, cap_emb: np.ndarray, *,
          ckpt_dir: Path | None, stop_after: int | None = None) -> tuple[TinyCLIP, dict[str, Any]]:
    """Contrastive training on (image, caption) pairs; resumable from `ckpt_dir`."""
    from paperflow.core.seeding import stream

    seed, tp = int(params["seed"]), params["train"]
    dev = device()
    model = build(params, cap_emb.shape[1], seed).to(dev)
    X = to_tensor(images).to(dev)
    T = torch.from_numpy(cap_emb).to(dev)
    ci = torch.from_numpy(cap_idx.astype(np.int64)).to(dev)
    B = min(int(tp["batch_size"]), len(X))

    def loss_fn(step: int) -> torch.Tensor:
        idx = torch.from_numpy(stream(seed, "piaa-batch", step).choice(len(X), size=B, replace=False)).to(dev)
        x = X[idx]
        if tp.get("flip", True):  # horizontal flips: the label set is unchanged
            flip = torch.from_numpy(stream(seed, "piaa-flip", step).random(B) < 0.5).to(dev)
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
        c = ci[idx]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            img = model.image(x).cls
            txt = model.text(T[c])
        return clip_loss(img.float(), txt.float(), model.logit_scale, targets=(c[:, None] == c[None, :]).float())

    res = fit(model, loss_fn, steps=int(tp["steps"]), lr=float(tp["lr"]), weight_decay=float(tp["weight_decay"]),
              warmup=float(tp["warmup"]), ckpt_dir=ckpt_dir, ckpt_every=int(tp["ckpt_every"]),
              stop_after=stop_after, log=log.info, log_every=50)
    k = max(1, len(res.losses) // 10)
    info = {"steps_done": res.step, "resumed_from": res.resumed_from,
            "loss_first": float(np.mean(res.losses[:k])) if res.losses else float("nan"),
            "loss_last": float(np.mean(res.losses[-k:])) if res.losses else float("nan"),
            "temperature": float(1.0 / model.logit_scale.detach().exp().clamp(max=100.0))}
    model.eval()
    return model, info


@torch.no_grad()
def encode_images(model: TinyCLIP, images: np.ndarray, mode: str, batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalised [CLS] [N, E] and patch features [N, P, E] with the last block in `mode`."""
    dev = next(model.parameters()).device
    cls, pat = [], []
    for i in range(0, len(images), batch):
        o = model.image(to_tensor(images[i:i + batch]).to(dev), last_block=mode)
        cls.append(torch.nn.functional.normalize(o.cls.float(), dim=-1).cpu())
        pat.append(torch.nn.functional.normalize(o.patches.float(), dim=-1).cpu())
    return torch.cat(cls).numpy(), torch.cat(pat).numpy()


@torch.no_grad()
def encode_text(model: TinyCLIP, emb: np.ndarray) -> np.ndarray:
    dev = next(model.parameters()).device
    return torch.nn.functional.normalize(model.text(torch.from_numpy(emb).to(dev)).float(), dim=-1).cpu().numpy()
