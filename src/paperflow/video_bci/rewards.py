"""The Cognitive Utility's terms (spec vision_language_b §7 "Mechanism"). The names DUS and PTS and their
intent are the paper's; every formula here is OUR formalisation [recon]. numpy, vectorised over samples.

Shapes: a sample is an answer a* (int) and a trace τ* (0/1 over T frames); priors are (a_j, τ_j), j = 1..N.
- r_acc = 1[a* = y]
- DUS = 1[a* = y] · Ĥ · (1 − p̂(a*)), Ĥ = entropy(p̂) / log min(N, |A|); `dus_mode: bonus` adds 1[a* = y ≠ â].
- PTS = max_{j: a_j = y} sim(τ*, τ_j) − max_{j: a_j ≠ y} sim(τ*, τ_j) when both sets are non-empty, else 0;
  sim = Jaccard; `pts_gate: correct` multiplies it by 1[a* = y] (default: ungated).
- entropy-weighted accuracy (control (h)): r_acc · (1 + λ₁ Ĥ).
- arm `dus_bonus` (d′): (d) with `dus_mode: bonus` whatever the config says (the explicit consensus-challenging bonus).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

ARM_REWARDS = {  # arm -> (λ_dus on, λ_pts on, entropy-weighted)
    "direct": (False, False, False), "racc": (False, False, False), "dus": (True, False, False),
    "dus_bonus": (True, False, False), "pts": (False, True, False), "dus_pts": (True, True, False), "resampled": (False, False, False),
    "entropy_weighted": (False, False, True),
}


def jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Jaccard of 0/1 sets along the last axis (broadcast); two empty sets have similarity 1."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    inter = (a & b).sum(-1)
    union = (a | b).sum(-1)
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def r_acc(ans: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (np.asarray(ans) == np.asarray(y)).astype(float)


def dus(ans: np.ndarray, y: np.ndarray, p_hat: np.ndarray, H_hat: np.ndarray, majority: np.ndarray,
        mode: str = "product") -> np.ndarray:
    """ans, y, H_hat, majority: [...]; p_hat: [..., 5] (the item's prior answer histogram)."""
    ans = np.asarray(ans)
    acc = r_acc(ans, y)
    p_a = np.take_along_axis(p_hat, ans[..., None].astype(int), axis=-1)[..., 0]
    out = acc * H_hat * (1.0 - p_a)
    if mode == "bonus":
        out = out + acc * (np.asarray(y) != np.asarray(majority))
    elif mode != "product":
        raise ValueError(f"dus mode {mode!r}")
    return out


def pts(ans: np.ndarray, trace: np.ndarray, y: np.ndarray, prior_ans: np.ndarray, prior_trace: np.ndarray,
        gate: str = "none") -> np.ndarray:
    """ans, y: [...]; trace: [..., T]; prior_ans: [..., N]; prior_trace: [..., N, T]."""
    sim = jaccard(np.asarray(trace)[..., None, :], prior_trace)  # [..., N]
    correct = np.asarray(prior_ans) == np.asarray(y)[..., None]
    has_c, has_w = correct.any(-1), (~correct).any(-1)
    best_c = np.where(correct, sim, -np.inf).max(-1)
    best_w = np.where(~correct, sim, -np.inf).max(-1)
    both = has_c & has_w
    out = np.where(both, np.where(both, best_c, 0.0) - np.where(both, best_w, 0.0), 0.0)
    if gate == "correct":
        out = out * r_acc(ans, y)
    elif gate != "none":
        raise ValueError(f"pts gate {gate!r}")
    return out


def utility(arm: str, ans: np.ndarray, trace: np.ndarray, item: Mapping[str, np.ndarray],
            cfg: Mapping[str, Any]) -> np.ndarray:
    """U for samples of shape [B, G] (trace [B, G, T]) of the items `item` (arrays [B, ...]).

    item: y, p_hat, H_hat, majority, prior_ans, prior_trace. cfg: lambda_dus, lambda_pts, dus_mode, pts_gate.
    r_fmt is 0: every sample of the tiny policy is well-formed (the TRL path scores the format)."""
    use_dus, use_pts, ent_w = ARM_REWARDS[arm]
    y = item["y"][:, None]
    u = r_acc(ans, y)
    if ent_w:
        u = u * (1.0 + float(cfg["lambda_dus"]) * item["H_hat"][:, None])
    if use_dus:
        mode = "bonus" if arm == "dus_bonus" else str(cfg["dus_mode"])
        u = u + float(cfg["lambda_dus"]) * dus(ans, y, item["p_hat"][:, None, :], item["H_hat"][:, None],
                                               item["majority"][:, None], mode)
    if use_pts:
        u = u + float(cfg["lambda_pts"]) * pts(ans, trace, y, item["prior_ans"][:, None, :],
                                               item["prior_trace"][:, None, :, :], str(cfg["pts_gate"]))
    return u
