"""Base model (the shared `paperflow.nn.transformer`), episode → sequence layout, and the student modules.

Sequence layout: `[BOS] (vis_1 QRY ans_1) … (vis_k QRY ans_k) vis_q QRY`; the model reads the answer at every
QRY position (pre-training supervises all of them, so one sequence trains k = 0..n_demos). Inputs are
continuous: a visual token fills the first `vis_dim` features, a symbol (answer 0..8, BOS, QRY) is a one-hot
in the remaining features, so the transformer's input projection acts as the token embedding.
The query q = (vis_q, QRY) is the last two positions; the student sees `[BOS] vis_q QRY` only.

Student modules (all [recon] of the abstract; only they train, the base is frozen):
- `shift` (LIVE-like): learned vectors per query position, added at the configured sites (`shift_sites`):
  `residual` — every hidden state 0..L (through `steer`); `attn_out` — every block's self-attention output
  (LIVE's own site: it shifts the attention output, the "ICL as attention shift" view). Both by default, which
  puts the arm inside the 2× parameter band of (f) (README);
- `vkv` (HiFICL-like): per layer and head, `slots` virtual keys/values in a second softmax whose output is
  added with a per-head tanh gate (initialised 0, so the student starts as the zero-shot model);
- `logit` adapter: a_ij = q_i·k_j/√d_h + g · (q_i U)(k_j V)ᵀ/√r on pre-rotary (content) q, k; V = 0 at init;
  gate `fixed` (one learned scalar per layer × head, sigmoid) or `adaptive`
  (sigmoid(W₂ GELU(W₁[LN(h_i); mean_j LN(h_j)]) + b) per token, layer, head);
- `lora`: peft LoRA on the fused qkv projection.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperflow.hyper_icl.data import N_LABELS
from paperflow.nn.transformer import Attention, Transformer, TransformerConfig, apply_rotary

BOS, QRY = N_LABELS, N_LABELS + 1
N_SYMBOLS = N_LABELS + 2
QUERY_LEN = 2  # (vis_q, QRY)


def base_config(vis_dim: int, p: Mapping[str, Any]) -> TransformerConfig:
    return TransformerConfig(d_model=int(p["d_model"]), n_heads=int(p["heads"]), n_layers=int(p["layers"]),
                             input_dim=vis_dim + N_SYMBOLS, out_dim=N_LABELS, causal=True)


def build_base(vis_dim: int, p: Mapping[str, Any]) -> Transformer:
    return Transformer(base_config(vis_dim, p))


def sequences(vis: Tensor, labels: Tensor | None) -> Tensor:
    """Episodes → inputs. vis [B, n, dim] (the last item is the query), labels [B, n] (the query's label is
    never placed in the input). Returns x [B, 3n, dim + N_SYMBOLS]; QRY positions are 3j + 2."""
    B, n, dim = vis.shape
    T = 3 * n
    x = vis.new_zeros(B, T, dim + N_SYMBOLS)
    x[:, 0, dim + BOS] = 1.0
    for j in range(n):
        x[:, 3 * j + 1, :dim] = vis[:, j]
        x[:, 3 * j + 2, dim + QRY] = 1.0
        if j < n - 1:
            assert labels is not None
            x[:, 3 * j + 3, dim:] = F.one_hot(labels[:, j], N_SYMBOLS).to(x.dtype)
    return x


def qry_positions(n: int) -> list[int]:
    return [3 * j + 2 for j in range(n)]


def icl_inputs(demo_vis: Tensor, demo_label: Tensor, q_vis: Tensor) -> Tensor:
    """Teacher input: k demos then the query. demo_vis [B, k, dim], demo_label [B, k], q_vis [B, dim]."""
    vis = torch.cat([demo_vis, q_vis[:, None]], 1)
    lab = torch.cat([demo_label, demo_label.new_zeros(demo_label.shape[0], 1)], 1)
    return sequences(vis, lab)


def query_inputs(q_vis: Tensor) -> Tensor:
    """Student / zero-shot input `[BOS] vis_q QRY`."""
    return sequences(q_vis[:, None], None)


# ---------------------------------------------------------------------------------------------- adapters
class Gate(nn.Module):
    """The query-adaptive gate: per token, layer and head, in (0, 1)."""

    def __init__(self, d_model: int, n_heads: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(2 * d_model, hidden)
        self.w2 = nn.Linear(hidden, n_heads)

    def forward(self, x_ln: Tensor) -> Tensor:  # x_ln [B, T, D] = LN(h) → [B, H, T, 1]
        ctx = x_ln.mean(1, keepdim=True).expand_as(x_ln)
        g = torch.sigmoid(self.w2(F.gelu(self.w1(torch.cat([x_ln, ctx], -1)))))
        return g.transpose(1, 2)[..., None]


class AdaptedAttention(nn.Module):
    """The base block's attention (frozen weights shared by reference) plus a logit adapter or virtual KV."""

    def __init__(self, base: Attention, d_model: int, kind: str, p: Mapping[str, Any]):
        super().__init__()
        self.base = base
        self.kind = kind
        H, dh = base.n_heads, base.head_dim
        self.H, self.dh = H, dh
        if kind in ("logit_fixed", "logit_adaptive"):
            r = int(p["rank"])
            self.r = r
            self.U = nn.Parameter(torch.randn(H, dh, r) / math.sqrt(dh))
            self.V = nn.Parameter(torch.zeros(H, dh, r))
            if kind == "logit_fixed":
                self.gate_logit = nn.Parameter(torch.zeros(H))
            else:
                self.gate = Gate(d_model, H, int(p["gate_hidden"]))
        elif kind == "vkv":
            m = int(p["vkv_slots"])
            self.vk = nn.Parameter(torch.randn(H, m, dh) * 0.5)
            self.vv = nn.Parameter(torch.randn(H, m, dh) * 0.1)
            self.vgate = nn.Parameter(torch.zeros(H))
        else:
            raise ValueError(f"unknown attention adapter {kind!r}")

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        b = self.base
        B, T, D = x.shape
        q, k, v = b.qkv(x).view(B, T, 3, self.H, self.dh).permute(2, 0, 3, 1, 4)
        qr, kr = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        scores = qr @ kr.transpose(-2, -1) / math.sqrt(self.dh)
        if self.kind.startswith("logit"):
            qu = torch.einsum("bhtd,hdr->bhtr", q, self.U)
            kv = torch.einsum("bhtd,hdr->bhtr", k, self.V)
            g = (torch.sigmoid(self.gate_logit)[None, :, None, None] if self.kind == "logit_fixed"
                 else self.gate(x))
            scores = scores + g * (qu @ kv.transpose(-2, -1)) / math.sqrt(self.r)
        if mask is not None:
            scores = scores + mask
        w = scores.softmax(-1)
        y = w @ v
        if self.kind == "vkv":
            vw = (qr @ self.vk.transpose(-2, -1)[None] / math.sqrt(self.dh)).softmax(-1)
            y = y + torch.tanh(self.vgate)[None, :, None, None] * (vw @ self.vv[None])
        return b.proj(y.transpose(1, 2).reshape(B, T, D)), (w if need_weights else None)


class ShiftedAttention(nn.Module):
    """The base block's attention (frozen, shared by reference) with a learned vector per position added to its
    output (LIVE's site). Zero at init, so the student starts as the zero-shot model."""

    def __init__(self, base: Attention, positions: int, d_model: int):
        super().__init__()
        self.base = base
        self.shift = nn.Parameter(torch.zeros(positions, d_model))

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        a, w = self.base(x, cos, sin, mask, need_weights)
        return a + self.shift[: x.shape[1]], w


SHIFT_SITES = ("residual", "attn_out")


class Student(nn.Module):
    """A frozen copy of the base model plus one arm's trainable modules. forward(x) → TransformerOutput."""

    def __init__(self, base: Transformer, arm_kind: str, p: Mapping[str, Any]):
        super().__init__()
        self.kind = arm_kind
        net = copy.deepcopy(base)
        for prm in net.parameters():
            prm.requires_grad_(False)
        self.shift: nn.Parameter | None = None
        if arm_kind == "shift":
            sites = list(p["shift_sites"])
            if not sites or any(s not in SHIFT_SITES for s in sites):
                raise ValueError(f"shift_sites must be a non-empty subset of {SHIFT_SITES}, got {sites}")
            if "residual" in sites:
                self.shift = nn.Parameter(torch.zeros(net.cfg.n_layers + 1, 1 + QUERY_LEN, net.cfg.d_model))
            if "attn_out" in sites:
                for blk in net.blocks:
                    blk.attn = ShiftedAttention(blk.attn, 1 + QUERY_LEN, net.cfg.d_model)  # type: ignore[assignment]
        elif arm_kind in ("vkv", "logit_fixed", "logit_adaptive"):
            for blk in net.blocks:
                blk.attn = AdaptedAttention(blk.attn, net.cfg.d_model, arm_kind, p)  # type: ignore[assignment]
        elif arm_kind == "lora":
            from peft import LoraConfig, inject_adapter_in_model

            cfg = LoraConfig(r=int(p["lora_rank"]), lora_alpha=2 * int(p["lora_rank"]), lora_dropout=0.0,
                             target_modules=["qkv"], bias="none")
            net = inject_adapter_in_model(cfg, net)
        elif arm_kind != "none":
            raise ValueError(f"unknown student kind {arm_kind!r}")
        self.net = net

    def forward(self, x: Tensor, output_hidden_states: bool = False) -> Any:
        steer = None
        if self.shift is not None:
            steer = {i: self.shift[i, : x.shape[1]].expand(x.shape[0], -1, -1) for i in range(self.shift.shape[0])}
        return self.net(x, output_hidden_states=output_hidden_states, steer=steer)

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def n_trainable(self) -> int:
        return int(sum(p.numel() for p in self.trainable()))


# ------------------------------------------------------------------------------ parameter budget band
REFERENCE_KIND = "logit_adaptive"  # (f): the gated logit adapter every arm is compared with
BAND_KEYS = {"shift": "adapter.shift_sites", "vkv": "adapter.vkv_slots", "logit_fixed": "adapter.rank",
             "logit_adaptive": "adapter.rank / adapter.gate_hidden", "lora": "adapter.lora_rank"}


def trainable_counts(base: Transformer, p: Mapping[str, Any], kinds: list[str]) -> dict[str, int]:
    """Trainable parameters of each student kind, counted on the modules themselves (built from `p` on `base`)."""
    return {k: Student(base, k, p).n_trainable() for k in dict.fromkeys(kinds) if k != "none"}


def check_param_band(counts: Mapping[str, int], max_ratio: float, ref: str = REFERENCE_KIND) -> dict[str, float]:
    """Ratios count / count[ref]; raise ValueError naming every kind outside [1/max_ratio, max_ratio]."""
    if ref not in counts or counts[ref] <= 0:
        raise ValueError(f"parameter band: the reference {ref!r} has no trainable parameters ({dict(counts)})")
    ratios = {k: n / counts[ref] for k, n in counts.items()}
    bad = {k: r for k, r in ratios.items() if not 1 / max_ratio <= r <= max_ratio}
    if bad:
        lines = "; ".join(f"{k}: {counts[k]} parameters = {r:.2f}× (change {BAND_KEYS.get(k, 'its size keys')})"
                          for k, r in bad.items())
        raise ValueError(f"hyper_icl: trainable parameters outside [{1 / max_ratio:.2f}×, {max_ratio:g}×] of the "
                         f"gated logit adapter (f) = {counts[ref]} parameters: {lines}. The spec keeps every arm "
                         f"within {max_ratio:g}× of (f) (report.max_param_ratio).")
    return ratios


# ---------------------------------------------------------------------------------- geometry (float64)
def fixed_map(h: Tensor, mean: Tensor, std: Tensor, scale: float, r_max: float) -> Tensor:
    """v = clip(s · standardize(h), ‖v‖ ≤ r_max): a fixed (not learned) map, in float64."""
    v = scale * (h.double() - mean.double()) / std.double()
    norm = v.norm(dim=-1, keepdim=True)
    return v * torch.clamp(r_max / norm.clamp_min(1e-12), max=1.0)


def lorentz_lift(v: Tensor, c: float) -> Tensor:
    """Exponential map at the origin of the hyperboloid of curvature −c: [..., d] → [..., d + 1] (float64)."""
    v = v.double()
    sc = math.sqrt(c)
    n = v.norm(dim=-1, keepdim=True)
    t = sc * n
    # sinh(t)/t with its limit 1 at t = 0
    ratio = torch.where(t > 1e-8, torch.sinh(t) / t.clamp_min(1e-8), torch.ones_like(t))
    return torch.cat([torch.cosh(t) / sc, ratio * v], -1)


def lorentz_inner(x: Tensor, y: Tensor) -> Tensor:
    return -x[..., 0] * y[..., 0] + (x[..., 1:] * y[..., 1:]).sum(-1)


def lorentz_distance(x: Tensor, y: Tensor, c: float, eps: float = 1e-6) -> Tensor:
    """d_c(x, y) = arcosh(−c⟨x, y⟩_L)/√c with the argument clamped to ≥ 1 + eps (float64)."""
    z = (-c * lorentz_inner(x.double(), y.double())).clamp_min(1.0 + eps)
    return torch.arccosh(z) / math.sqrt(c)


def poincare_distance(p: Tensor, q: Tensor, c: float) -> Tensor:
    """The Poincaré-ball distance (used by the tests to check the Lorentz formula)."""
    p, q = p.double(), q.double()
    num = 2 * c * ((p - q) ** 2).sum(-1)
    den = (1 - c * (p**2).sum(-1)) * (1 - c * (q**2).sum(-1))
    return torch.arccosh(1 + num / den) / math.sqrt(c)


def lorentz_to_poincare(x: Tensor, c: float) -> Tensor:
    return x[..., 1:] / (1 + math.sqrt(c) * x[..., :1])


def layer_distance(vs: Tensor, vt: Tensor, geometry: str, c: float, eps: float) -> Tensor:
    """Per-token distance between mapped student and teacher states (float64): Lorentz or Euclidean."""
    if geometry == "lorentz":
        return lorentz_distance(lorentz_lift(vs, c), lorentz_lift(vt, c), c, eps)
    if geometry == "euclidean":
        return torch.sqrt(((vs - vt) ** 2).sum(-1) + 1e-12)
    raise ValueError(f"unknown geometry {geometry!r}")


def standardizer(hidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer, per-dimension mean and std of teacher states [N, L, P, D] → ([L, D], [L, D])."""
    flat = hidden.transpose(1, 0, 2, 3).reshape(hidden.shape[1], -1, hidden.shape[-1])
    return flat.mean(1), flat.std(1) + 1e-6
