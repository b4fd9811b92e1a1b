"""Weak-supervision losses on a score map S [B, P, H, W] (our restatement of inlmouse/MACH loss/auxloss.py).

- :func:`topk_multi_positive`: S / max|S| per image (detached), pool each prompt by the mean of its top
  k = max(1, floor(rho * HW)) locations (or the mean of all locations, arm E), divide by T = 0.07,
  log-softmax over the image's prompts, cross-entropy against a target uniform over its positives.
  Prompts neither positive nor verified-negative (LVIS federated labels) are left out of the softmax.
- :func:`box_in_out`: relu(margin - mean_in S_p + mean_out S_p) per ground-truth box on the same
  per-image-normalised map, box corners floor/ceil'd to the grid; mean over boxes.
- :func:`gaco`: S / max|S| over the whole batch (not detached, as in the code); log q = log-softmax over
  all P*H*W entries of an image; on the positive prompts' mask entries M, R = sigmoid(S / max|S|),
  A = clip((R - mean_M R) / (std_M R + eps), +-clip); loss = -sum_M A log q / |M| (|M| summed over the
  batch). Advantages carry gradient unless `detach_advantage` (the ablation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def topk_k(rho: float, hw: int) -> int:
    return max(1, int(rho * hw))


def pooled_logits(S: torch.Tensor, rho: float, pooling: str = "topk") -> torch.Tensor:
    """[B, P] image-level prompt scores of the per-image-normalised map (before the temperature)."""
    B, P, H, W = S.shape
    Sn = S / (S.detach().abs().amax(dim=(1, 2, 3), keepdim=True) + 1e-12)
    flat = Sn.view(B, P, H * W)
    if pooling == "mean":
        return flat.mean(-1)
    if pooling != "topk":
        raise ValueError(f"unknown pooling {pooling!r}")
    return flat.topk(topk_k(rho, H * W), dim=-1).values.mean(-1)


def topk_multi_positive(S: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor | None = None, *,
                        rho: float = 0.01, temperature: float = 0.07, pooling: str = "topk") -> torch.Tensor:
    """pos, valid: bool [B, P]; valid = positive or verified negative (all True for exhaustive labels)."""
    logits = pooled_logits(S, rho, pooling) / (temperature + 1e-12)
    if valid is not None:
        logits = logits.masked_fill(~(valid | pos), float("-inf"))
    logp = F.log_softmax(logits, dim=1)
    posf = pos.to(logp.dtype)
    n = posf.sum(1)
    keep = n > 0
    if not keep.any():
        return S.sum() * 0.0
    target = posf / n.clamp(min=1)[:, None]
    per = -(target * logp.masked_fill(~pos, 0.0)).sum(1)
    return per[keep].mean()


def box_masks(boxes: torch.Tensor, H: int, W: int, image_size: int) -> torch.Tensor:
    """[N, H, W] bool: grid cells covered by each pixel box (x, y, w, h), corners floor/ceil'd, >= 1 cell."""
    b = boxes / image_size
    x1 = torch.floor(b[:, 0] * W).long().clamp(0, W - 1)
    y1 = torch.floor(b[:, 1] * H).long().clamp(0, H - 1)
    x2 = torch.maximum(torch.ceil((b[:, 0] + b[:, 2]) * W).long().clamp(0, W), x1 + 1)
    y2 = torch.maximum(torch.ceil((b[:, 1] + b[:, 3]) * H).long().clamp(0, H), y1 + 1)
    xs = torch.arange(W, device=boxes.device)[None, None, :]
    ys = torch.arange(H, device=boxes.device)[None, :, None]
    return ((xs >= x1[:, None, None]) & (xs < x2[:, None, None]) & (ys >= y1[:, None, None])
            & (ys < y2[:, None, None]))


def box_in_out(S: torch.Tensor, inst_b: torch.Tensor, inst_p: torch.Tensor, boxes: torch.Tensor, *,
               image_size: int, margin: float = 0.3) -> torch.Tensor:
    """inst_b, inst_p: [N] batch row and prompt of each box; boxes [N, 4] pixel xywh."""
    if inst_b.numel() == 0:
        return S.sum() * 0.0
    B, P, H, W = S.shape
    Sn = S / (S.detach().abs().amax(dim=(1, 2, 3), keepdim=True) + 1e-12)
    maps = Sn[inst_b, inst_p]  # [N, H, W]
    m_in = box_masks(boxes, H, W, image_size).to(maps.dtype)
    m_out = 1.0 - m_in
    s_in = (maps * m_in).sum((1, 2)) / m_in.sum((1, 2)).clamp(min=1)
    s_out = (maps * m_out).sum((1, 2)) / m_out.sum((1, 2)).clamp(min=1)
    return F.relu(margin - s_in + s_out).mean()


def gaco(S: torch.Tensor, M: torch.Tensor, *, clip: float = 5.0, eps: float = 1e-6,
         detach_advantage: bool = False) -> torch.Tensor:
    """M: [B, P, H, W] 0/1, the positive prompts' object cells (zero for absent prompts)."""
    B = S.shape[0]
    Sn = S / (S.abs().max() + 1e-12)
    logq = F.log_softmax(Sn.reshape(B, -1), dim=1)
    R = torch.sigmoid(Sn).reshape(B, -1)
    Mf = M.reshape(B, -1).to(S.dtype)
    cnt = Mf.sum(1)
    tot = cnt.sum()
    if tot == 0:
        return S.sum() * 0.0
    c = cnt.clamp(min=1)[:, None]
    mu = (R * Mf).sum(1, keepdim=True) / c
    var = (((R - mu) ** 2) * Mf).sum(1, keepdim=True) / c
    A = ((R - mu) / (var.clamp_min(1e-12).sqrt() + eps)).clamp(-clip, clip)  # clamp: finite gradient at std 0
    if detach_advantage:
        A = A.detach()
    return -(A * logq * Mf).sum() / tot


def grid_masks(inst_mask: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """[N, S, S] pixel masks -> [N, H, W] cell masks: cells at least half covered, plus the most-covered
    cell of each object (so small objects keep one cell)."""
    N, S, _ = inst_mask.shape
    if N == 0:
        return torch.zeros(0, H, W, dtype=torch.bool)
    frac = F.adaptive_avg_pool2d(inst_mask.float()[:, None], (H, W))[:, 0]
    best = frac.flatten(1).argmax(1)
    g = frac >= 0.5
    g.view(N, -1)[torch.arange(N), best] = True
    return g
