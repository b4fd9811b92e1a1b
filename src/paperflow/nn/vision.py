"""Tiny CLIP-style vision-language pieces shared by the vision-language studies (one readable file).

- `ViTConfig`, `TinyViT`: a small ViT image encoder (patch embedding by a strided conv, a [CLS] token,
  learned absolute position embeddings, pre-norm blocks, a final LayerNorm and a linear projection).
  It returns the projected [CLS] embedding *and* the projected patch tokens (the same final LayerNorm and
  projection are applied to both, as in SCLIP / MaskCLIP). The last block's attention can be swapped at
  inference time, without retraining:
    * `last_block="vanilla"`   softmax(q kᵀ/√d) — the trained model;
    * `last_block="sclip"`     SCLIP correlative self-attention, softmax(q qᵀ/√d) + softmax(k kᵀ/√d)
                               (the two maps are summed, rows sum to 2, as in wangf3014/SCLIP), residual
                               and MLP kept;
    * `last_block="clearclip"` the same correlative attention with the last block's residual and MLP
                               dropped (ClearCLIP-style): the block's output is the attention output alone.
- `TextEncoder`: the text side — a learnable embedding table (integer ids) and/or a linear (or 2-layer)
  projection of fixed features (e.g. frozen MiniLM sentence or token embeddings); `masked_mean` pools tokens.
- `clip_loss`: symmetric InfoNCE with a learnable log-temperature (CLIP), optionally multi-positive.
- `fit`: a compact, resumable AdamW + warm-up/cosine training loop over a step-indexed loss closure
  (checkpoints through `paperflow.core.checkpoint`; a stopped-and-resumed run ends bit-identical).
- `modality_gap`: distance between the centroids of L2-normalised image and text embeddings.
- `multilabel_map`: multi-label mean average precision (scikit-learn's `average_precision_score` per
  class); classes with no positive example have no AP (NaN) and are left out of the mean, explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

LAST_BLOCK_MODES = ("vanilla", "sclip", "clearclip")


# ----------------------------------------------------------------------------------------------- image
@dataclass
class ViTConfig:
    image_size: int = 32  # square input, pixels
    patch_size: int = 4
    in_channels: int = 3
    d_model: int = 64  # transformer width
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int | None = None  # MLP width; default 4 * d_model
    embed_dim: int = 64  # joint image-text embedding width (output projection)
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} does not split into {self.n_heads} heads")

    @property
    def grid(self) -> int:
        """Patches per side."""
        return self.image_size // self.patch_size

    @property
    def n_patches(self) -> int:
        return self.grid**2


@dataclass
class ViTOutput:
    cls: Tensor  # [B, embed_dim] projected [CLS] embedding (not normalised)
    patches: Tensor  # [B, n_patches, embed_dim] projected patch tokens, raster order (row-major)
    hidden: Tensor  # [B, 1 + n_patches, d_model] last block output before the final LayerNorm
    attentions: tuple[Tensor, ...] | None = None  # n_layers x [B, n_heads, 1+N, 1+N] when requested


class _Block(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        d = cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln_1 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=cfg.norm_eps)
        ff = cfg.d_ff or 4 * d
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def attention(self, x: Tensor, mode: str, need_weights: bool = True) -> tuple[Tensor, Tensor | None]:
        """Attention output [B, T, d] and the weights [B, H, T, T] for `mode` (vanilla or correlative).
        Vanilla attention without `need_weights` runs the fused `scaled_dot_product_attention` kernel (the
        same softmax(q kᵀ/√hd) v, to float rounding; on CPU ≈ 40% less time per attention forward +
        backward than the explicit matrices at the tiny ViT's shapes) and returns None as the weights."""
        B, T, d = x.shape
        hd = d // self.n_heads
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        scale = hd**-0.5
        if mode == "vanilla" and not need_weights:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
            return self.out(o.transpose(1, 2).reshape(B, T, d)), None
        if mode == "vanilla":
            w = torch.softmax((q @ k.transpose(-1, -2)) * scale, dim=-1)
        else:  # correlative self-attention (SCLIP): q-q plus k-k, each softmaxed
            w = torch.softmax((q @ q.transpose(-1, -2)) * scale, dim=-1) + torch.softmax(
                (k @ k.transpose(-1, -2)) * scale, dim=-1)
        o = (w @ v).transpose(1, 2).reshape(B, T, d)
        return self.out(o), w

    def forward(self, x: Tensor, mode: str = "vanilla", need_weights: bool = True) -> tuple[Tensor, Tensor | None]:
        a, w = self.attention(self.ln_1(x), mode, need_weights)
        if mode == "clearclip":
            return a, w  # no residual, no MLP
        x = x + a
        return x + self.mlp(self.ln_2(x)), w


class TinyViT(nn.Module):
    """A small ViT image tower; `forward(images)` -> `ViTOutput` (projected [CLS] and patch tokens)."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.patch_embed = nn.Conv2d(cfg.in_channels, d, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + cfg.n_patches, d) * 0.02)
        self.ln_pre = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_post = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.proj = nn.Linear(d, cfg.embed_dim, bias=False)
        nn.init.normal_(self.cls_token, std=0.02)

    def forward(self, images: Tensor, *, last_block: str = "vanilla", output_attentions: bool = False) -> ViTOutput:
        """images: float [B, in_channels, image_size, image_size]. `last_block` in LAST_BLOCK_MODES
        chooses the last block's attention (training-free swap; see the module docstring)."""
        if last_block not in LAST_BLOCK_MODES:
            raise ValueError(f"last_block must be one of {LAST_BLOCK_MODES}, got {last_block!r}")
        c, s = self.cfg.in_channels, self.cfg.image_size
        if images.dim() != 4 or tuple(images.shape[1:]) != (c, s, s):
            raise ValueError(f"images must be [B, {c}, {s}, {s}], got {tuple(images.shape)}")
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # [B, N, d]
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.ln_pre(x)
        attns = []
        for i, blk in enumerate(self.blocks):
            x, w = blk(x, last_block if i == len(self.blocks) - 1 else "vanilla", output_attentions)
            if w is not None:
                attns.append(w)
        z = self.proj(self.ln_post(x))
        return ViTOutput(cls=z[:, 0], patches=z[:, 1:], hidden=x,
                         attentions=tuple(attns) if output_attentions else None)


# ------------------------------------------------------------------------------------------------ text
class TextEncoder(nn.Module):
    """Text side of a tiny CLIP. Integer input [...] -> a learnable table (`vocab_size` rows); float input
    [..., in_dim] -> a projection of fixed features (linear, or a 2-layer GELU MLP when `hidden` is set).
    Output [..., embed_dim] (not normalised). Configure either or both; the input dtype chooses."""

    def __init__(self, embed_dim: int, *, vocab_size: int | None = None, in_dim: int | None = None,
                 hidden: int | None = None):
        super().__init__()
        if vocab_size is None and in_dim is None:
            raise ValueError("give vocab_size (learnable table) and/or in_dim (projection of fixed features)")
        self.table = nn.Embedding(vocab_size, embed_dim) if vocab_size else None
        if self.table is not None:
            nn.init.normal_(self.table.weight, std=embed_dim**-0.5)
        self.proj: nn.Module | None = None
        if in_dim:
            self.proj = (nn.Linear(in_dim, embed_dim) if hidden is None else
                         nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, embed_dim)))

    def forward(self, x: Tensor) -> Tensor:
        if not torch.is_floating_point(x):
            if self.table is None:
                raise ValueError("integer input needs vocab_size")
            return self.table(x)
        if self.proj is None:
            raise ValueError("float input needs in_dim")
        return self.proj(x)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x [B, T, E] over the positions where mask [B, T] is true/1 -> [B, E] (empty rows -> 0)."""
    m = mask.to(x.dtype).unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


# ------------------------------------------------------------------------------------------------ loss
def init_logit_scale(temperature: float = 0.07) -> nn.Parameter:
    """CLIP's learnable log inverse temperature, log(1/temperature)."""
    return nn.Parameter(torch.tensor(math.log(1.0 / temperature)))


def clip_loss(image_emb: Tensor, text_emb: Tensor, logit_scale: Tensor, *, targets: Tensor | None = None,
              max_scale: float = 100.0) -> Tensor:
    """Symmetric InfoNCE (CLIP). image_emb [B, E], text_emb [M, E] (normalised here), logit_scale the
    log inverse temperature (exp is clamped to `max_scale`). Without `targets`, M == B and pair i is
    (image i, text i). With targets [B, M] (bool/0-1, e.g. identical captions), every marked pair is a
    positive: each side's cross-entropy uses the normalised marked row/column as a soft target (rows or
    columns with no positive are skipped). Returns the mean of the two directions."""
    img = F.normalize(image_emb, dim=-1)
    txt = F.normalize(text_emb, dim=-1)
    logits = logit_scale.exp().clamp(max=max_scale) * img @ txt.t()  # [B, M]
    if targets is None:
        if logits.shape[0] != logits.shape[1]:
            raise ValueError(f"without targets image and text batches must match, got {tuple(logits.shape)}")
        y = torch.arange(logits.shape[0], device=logits.device)
        return 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits.t(), y))
    t = targets.to(logits.dtype)
    if t.shape != logits.shape:
        raise ValueError(f"targets shape {tuple(t.shape)} != logits shape {tuple(logits.shape)}")

    def soft_ce(lg: Tensor, tg: Tensor) -> Tensor:
        keep = tg.sum(1) > 0
        p = tg[keep] / tg[keep].sum(1, keepdim=True)
        return -(p * F.log_softmax(lg[keep], dim=1)).sum(1).mean()

    return 0.5 * (soft_ce(logits, t) + soft_ce(logits.t(), t.t()))


def modality_gap(image_emb: Tensor | np.ndarray, text_emb: Tensor | np.ndarray) -> float:
    """‖mean(normalise(image)) − mean(normalise(text))‖₂ (Liang et al. 2022), in [0, 2]."""
    a = F.normalize(torch.as_tensor(np.asarray(image_emb) if not isinstance(image_emb, Tensor) else image_emb,
                                    dtype=torch.float64), dim=-1)
    b = F.normalize(torch.as_tensor(np.asarray(text_emb) if not isinstance(text_emb, Tensor) else text_emb,
                                    dtype=torch.float64), dim=-1)
    return float((a.reshape(-1, a.shape[-1]).mean(0) - b.reshape(-1, b.shape[-1]).mean(0)).norm())


# -------------------------------------------------------------------------------------------- training
@dataclass
class FitResult:
    losses: list[float] = field(default_factory=list)  # one per step done, over all (resumed) runs
    step: int = 0  # steps done so far (== total steps unless stopped early by `stop_after`)
    resumed_from: int = 0  # step the checkpoint held at start (0: fresh start)


def fit(model: nn.Module, loss_fn: Callable[[int], Tensor], *, steps: int, lr: float,
        weight_decay: float = 0.0, warmup: float | int = 0.05, grad_clip: float | None = 1.0,
        ckpt_dir: str | Path | None = None, ckpt_every: int = 100, stop_after: int | None = None,
        log: Callable[[str], Any] | None = None, log_every: int = 50) -> FitResult:
    """Train `model` (all its parameters, including e.g. a logit scale registered on it) with AdamW and a
    linear warm-up + cosine schedule for `steps` steps. `loss_fn(step)` returns the scalar loss of step
    `step`; draw its batch from a generator seeded by (seed, step) so a resumed run sees the same batches.
    With `ckpt_dir`, the full training state (weights, optimizer, scheduler, torch RNG, loss history) is
    saved every `ckpt_every` steps and at the end, and a rerun resumes from it. `stop_after=n` stops once
    n steps are done (saving a checkpoint first) — for interruption tests."""
    from paperflow.core import checkpoint as ck
    from paperflow.core.schedule import lambda_lr

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    sched = lambda_lr(opt, steps, warmup)
    res = FitResult()
    if ckpt_dir is not None and ck.has_checkpoint(ckpt_dir):
        st = ck.load_training_state(ckpt_dir, model=model, optimizer=opt, scheduler=sched)
        res.step = res.resumed_from = st["step"]
        res.losses = [float(v) for v in st["extra"].get("losses", [])]

    def save() -> None:
        if ckpt_dir is not None:
            ck.save_training_state(ckpt_dir, model=model, optimizer=opt, scheduler=sched, step=res.step,
                                   extra={"losses": res.losses})

    model.train()
    while res.step < steps:
        if stop_after is not None and res.step >= stop_after:
            save()
            return res
        loss = loss_fn(res.step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        sched.step()
        res.losses.append(float(loss.detach()))
        res.step += 1
        if log is not None and log_every and (res.step % log_every == 0 or res.step == steps):
            log(f"step {res.step}/{steps} loss {res.losses[-1]:.4f} lr {sched.get_last_lr()[0]:.2e}")
        if ckpt_dir is not None and (res.step % ckpt_every == 0 or res.step == steps):
            save()
    model.eval()
    return res


# ------------------------------------------------------------------------------------------- metrics
@dataclass
class MAPResult:
    map: float  # mean AP over the classes with at least one positive (NaN when none has)
    per_class: np.ndarray  # [C] AP per class; NaN where the class has no positive example
    n_classes_scored: int  # classes that entered the mean


def multilabel_map(labels: np.ndarray | Tensor, scores: np.ndarray | Tensor) -> MAPResult:
    """Multi-label mAP: labels [N, C] in {0, 1}, scores [N, C] (higher = more likely). AP per class by
    `sklearn.metrics.average_precision_score`; a class with no positive example has undefined AP: it is
    NaN in `per_class` and left out of the mean (explicitly, never counted as 0 or 1)."""
    from sklearn.metrics import average_precision_score

    y = np.asarray(labels.detach().cpu() if isinstance(labels, Tensor) else labels)
    s = np.asarray(scores.detach().cpu() if isinstance(scores, Tensor) else scores, dtype=np.float64)
    if y.ndim != 2 or y.shape != s.shape:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must both be [N, C]")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0/1")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or inf")
    ap = np.full(y.shape[1], np.nan)
    for c in range(y.shape[1]):
        if y[:, c].any():
            ap[c] = average_precision_score(y[:, c].astype(int), s[:, c])
    ok = ~np.isnan(ap)
    return MAPResult(map=float(ap[ok].mean()) if ok.any() else float("nan"), per_class=ap,
                     n_classes_scored=int(ok.sum()))
