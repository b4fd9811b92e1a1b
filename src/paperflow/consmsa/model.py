"""ConsMSA model (our reconstruction of spec §4.2; no code or equations were public).

Per-modality encoders (linear projection + a small bidirectional transformer), a shared sentiment head
``q = softmax(W_s φ_m(h))`` over K bins, the consistency score I²CS (Jensen–Shannon based, intra × inter
by default), relevance coupling ``s = I²CS · rel``, and the three uses: the consistency regulariser
(``consistency_loss``), re-weighting ``h̃ = (1 + softmax(s/τ)) h`` and top-ρ pruning before a fusion
transformer with a [CLS] token and a regression head. Every reconstructed choice is a flag in ScoreConfig.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperflow.nn.transformer import Transformer, TransformerConfig

MODALITIES = ("text", "audio", "vision")
COMBINES = ("product", "intra", "inter", "mean")
RELEVANCES = ("bin_mass", "none")
SUMMARIES = ("mean", "attention")
SOURCES = ("encoded", "projected")
LN2 = math.log(2.0)


def js_norm(p: Tensor, r: Tensor, eps: float = 1e-8) -> Tensor:
    """Jensen–Shannon divergence / log 2 ∈ [0, 1] over the last axis (natural-log JS, normalised)."""
    m = 0.5 * (p + r)
    kl_pm = (p * (torch.log(p + eps) - torch.log(m + eps))).sum(-1)
    kl_rm = (r * (torch.log(r + eps) - torch.log(m + eps))).sum(-1)
    return (0.5 * (kl_pm + kl_rm) / LN2).clamp(0.0, 1.0)


def masked_mean(q: Tensor, mask: Tensor) -> Tensor:
    """q [B, T, K], mask [B, T] (1 = real token) → [B, K]."""
    w = mask.to(q.dtype)[..., None]
    return (q * w).sum(1) / w.sum(1).clamp_min(1.0)


def sentiment_bin(y: Tensor, n_bins: int) -> Tensor:
    """Score in [−3, 3] → bin index 0..n_bins−1 (7 bins: round(y) + 3, as Acc-7 rounds)."""
    half = (n_bins - 1) / 2
    return (torch.round(y.clamp(-3.0, 3.0) * half / 3.0) + half).long()


@dataclass
class ScoreConfig:
    combine: str = "product"  # product | intra | inter | mean (½(intra + inter))
    relevance: str = "bin_mass"  # bin_mass: q_i[consensus bin] | none: s = I²CS
    summary: str = "mean"  # mean | attention (learned pooling of q over tokens)
    source: str = "encoded"  # encoded: q from the unimodal encoder's output (spec) | projected: from the
    #                          token's own linear projection, before the encoder mixes tokens


def consistency(q: dict[str, Tensor], qbar: dict[str, Tensor], mask: dict[str, Tensor]
                ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """Per token C^intra and C^inter [B, T] for each modality (spec §4.2)."""
    intra, inter = {}, {}
    for m in q:
        intra[m] = 1.0 - js_norm(q[m], qbar[m][:, None, :])
        others = [js_norm(q[m], qbar[o][:, None, :]) for o in q if o != m]
        inter[m] = 1.0 - torch.stack(others).mean(0) if others else torch.ones_like(intra[m])
    return intra, inter


def combine_scores(intra: Tensor, inter: Tensor, how: str) -> Tensor:
    if how == "product":
        return intra * inter
    if how == "intra":
        return intra
    if how == "inter":
        return inter
    if how == "mean":
        return 0.5 * (intra + inter)
    raise ValueError(f"unknown combine '{how}' (one of {COMBINES})")


def relevance(q: dict[str, Tensor], qbar: dict[str, Tensor]) -> dict[str, Tensor]:
    """rel_i = q_i[b̂], b̂ = argmax_k Σ_m q̄^m[k] (the pre-fusion consensus bin)."""
    b = torch.stack(list(qbar.values())).sum(0).argmax(-1)  # [B]
    return {m: q[m].gather(-1, b[:, None, None].expand(-1, q[m].shape[1], 1)).squeeze(-1) for m in q}


def topk_keep(score: Tensor, mask: Tensor, keep: float) -> Tensor:
    """Indices [B, k] of the top-⌈keep·T⌉ real tokens by score (k ≥ 1); padded tokens rank last."""
    T = score.shape[1]
    k = max(1, min(T, int(math.ceil(keep * T - 1e-9))))
    s = score.masked_fill(mask <= 0, float("-inf"))
    return s.topk(k, dim=1).indices


def auroc(pos: Tensor, neg: Tensor) -> float:
    """P(score(pos) > score(neg)) + ½ P(tie) — AUROC of `neg` scoring lower (pos: informative)."""
    from sklearn.metrics import roc_auc_score

    if pos.numel() == 0 or neg.numel() == 0:
        return float("nan")
    y = torch.cat([torch.ones(pos.numel()), torch.zeros(neg.numel())]).numpy()
    return float(roc_auc_score(y, torch.cat([pos.flatten(), neg.flatten()]).double().numpy()))


@dataclass
class ModelConfig:
    input_dims: dict[str, int]
    d_model: int = 32
    n_heads: int = 2
    enc_layers: int = 1
    fusion_layers: int = 1
    n_bins: int = 7
    score: ScoreConfig = field(default_factory=ScoreConfig)


@dataclass
class Forward:
    pred: Tensor  # [B]
    q: dict[str, Tensor]  # [B, T, K]
    qbar: dict[str, Tensor]  # [B, K]
    intra: dict[str, Tensor]
    inter: dict[str, Tensor]
    i2cs: dict[str, Tensor]
    rel: dict[str, Tensor]
    s: dict[str, Tensor]  # importance (detached)
    kept: dict[str, Tensor] | None  # indices [B, k] per modality, None when nothing was pruned
    h: dict[str, Tensor]  # encoder outputs [B, T, d]
    cls_attn: dict[str, Tensor] | None  # [CLS]→token attention (mean over heads, last layer), [B, k]


class ConsMSA(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.enc = nn.ModuleDict({m: Transformer(TransformerConfig(
            d_model=d, n_heads=cfg.n_heads, n_layers=cfg.enc_layers, input_dim=cfg.input_dims[m], causal=False))
            for m in MODALITIES})
        self.phi = nn.ModuleDict({m: nn.Linear(d, d) for m in MODALITIES})
        self.head_s = nn.Linear(d, cfg.n_bins)  # W_s, shared by all modalities
        self.pool = nn.ModuleDict({m: nn.Linear(d, 1) for m in MODALITIES})  # summary 'attention' only
        self.mod_emb = nn.Parameter(torch.zeros(len(MODALITIES), d))
        self.cls = nn.Parameter(torch.zeros(d))
        self.fusion = Transformer(TransformerConfig(d_model=d, n_heads=cfg.n_heads, n_layers=cfg.fusion_layers,
                                                    input_dim=d, causal=False))
        self.reg = nn.Linear(d, 1)
        nn.init.normal_(self.mod_emb, std=0.02)
        nn.init.normal_(self.cls, std=0.02)

    def forward(self, x: dict[str, Tensor], mask: dict[str, Tensor], *, reweight: bool = False, tau: float = 0.1,
                keep: float = 1.0, prune_by: dict[str, Tensor] | None = None, want_attn: bool = False) -> Forward:
        """x[m] [B, T_m, d_m], mask[m] [B, T_m]. `keep` < 1 prunes per modality by `prune_by` (default s)."""
        sc = self.cfg.score
        h = {m: self.enc[m](x[m], padding_mask=mask[m]).last_hidden for m in MODALITIES}
        if sc.source == "encoded":
            src = h
        elif sc.source == "projected":
            src = {m: self.enc[m].embed_inputs(x[m]) for m in MODALITIES}
        else:
            raise ValueError(f"unknown source '{sc.source}' (one of {SOURCES})")
        q = {m: F.softmax(self.head_s(self.phi[m](src[m])), -1) for m in MODALITIES}
        if sc.summary == "mean":
            qbar = {m: masked_mean(q[m], mask[m]) for m in MODALITIES}
        elif sc.summary == "attention":
            qbar = {}
            for m in MODALITIES:
                a = self.pool[m](h[m]).squeeze(-1).masked_fill(mask[m] <= 0, float("-inf")).softmax(1)
                qbar[m] = (a[..., None] * q[m]).sum(1)
        else:
            raise ValueError(f"unknown summary '{sc.summary}' (one of {SUMMARIES})")
        intra, inter = consistency(q, qbar, mask)
        i2cs = {m: combine_scores(intra[m], inter[m], sc.combine) for m in MODALITIES}
        rel = relevance(q, qbar)
        if sc.relevance == "bin_mass":
            s = {m: (i2cs[m] * rel[m]).detach() for m in MODALITIES}
        elif sc.relevance == "none":
            s = {m: i2cs[m].detach() for m in MODALITIES}
        else:
            raise ValueError(f"unknown relevance '{sc.relevance}' (one of {RELEVANCES})")
        toks, masks = [], []
        kept: dict[str, Tensor] | None = {} if keep < 1.0 else None
        for j, m in enumerate(MODALITIES):
            hm, mm = h[m], mask[m].to(h[m].dtype)
            if reweight:
                w = (s[m] / tau).masked_fill(mm <= 0, float("-inf")).softmax(1)
                hm = (1.0 + w[..., None]) * hm
            if kept is not None:
                idx = topk_keep((prune_by or s)[m], mm, keep)
                kept[m] = idx
                hm = hm.gather(1, idx[..., None].expand(-1, -1, hm.shape[-1]))
                mm = mm.gather(1, idx)
            toks.append(hm + self.mod_emb[j])
            masks.append(mm)
        B = toks[0].shape[0]
        seq = torch.cat([self.cls.expand(B, 1, -1), *toks], 1)
        pm = torch.cat([torch.ones(B, 1, dtype=masks[0].dtype), *masks], 1)
        out = self.fusion(seq, padding_mask=pm, output_attentions=want_attn)
        pred = self.reg(out.last_hidden[:, 0]).squeeze(-1)
        cls_attn = None
        if want_attn:
            a = out.attentions[-1].mean(1)[:, 0, 1:]  # type: ignore[index]
            sizes = [t.shape[1] for t in toks]
            cls_attn = dict(zip(MODALITIES, a.split(sizes, dim=1)))
        return Forward(pred, q, qbar, intra, inter, i2cs, rel, s, kept, h, cls_attn)


def consistency_loss(f: Forward, mask: dict[str, Tensor]) -> Tensor:
    """L_cons = Σ_{m<m'} JSn(q̄^m, q̄^{m'}) + mean over real tokens of (1 − I²CS)."""
    ms = list(f.qbar)
    pair = sum(js_norm(f.qbar[a], f.qbar[b]).mean() for i, a in enumerate(ms) for b in ms[i + 1:])
    num = sum(((1.0 - f.i2cs[m]) * mask[m]).sum() for m in ms)
    den = sum(mask[m].sum() for m in ms)
    return pair + num / den.clamp_min(1.0)  # type: ignore[union-attr,return-value]


def anchor_loss(f: Forward, y: Tensor, n_bins: int) -> Tensor:
    """Σ_m CE(q̄^m, bin(y)): anchors the shared sentiment space."""
    b = sentiment_bin(y, n_bins)
    return sum(F.nll_loss(torch.log(f.qbar[m] + 1e-8), b) for m in f.qbar)  # type: ignore[return-value]
