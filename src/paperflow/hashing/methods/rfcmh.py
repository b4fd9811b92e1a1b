"""`rfcmh`: RFCMH as released [C] (spec §3): squared, row-normalised possibility; necessity from the
mean of the κ largest non-label possibilities; warm-up FAR loss + α·intra for `warmup_epochs`, then the
reliability-weighted margin loss (batch z-scored gap) + α·intra + the DGSA inter loss."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.hashing.methods import Batch, Method, register

KEYS = {k: f"rfcmh.{k}" for k in ("alpha", "kappa", "q", "tau", "gamma", "delta_shift", "tau_w", "proto_temp",
                                  "warmup_epochs")}


def _admissibility(z1: Any, z2: Any, y: Any, W: Any, mp: Mapping[str, Any], ml: bool) -> tuple[Any, Any]:
    from paperflow.hashing import model as M

    a1 = M.admissibility_code(M.possibility_code(z1, W, mp["proto_temp"], ml), y, mp["kappa"], ml)
    a2 = M.admissibility_code(M.possibility_code(z2, W, mp["proto_temp"], ml), y, mp["kappa"], ml)
    return a1, a2


def _loss(b: Batch) -> Any:
    from paperflow.hashing import model as M

    mp, ml = b.mp, b.multilabel
    a1, a2 = _admissibility(b.z1, b.z2, b.y, b.W, mp, ml)
    intra = M.intra_code(b.z1, b.z2, mp["tau"], mp["q"])
    if b.epoch <= mp["warmup_epochs"]:
        return M.warm_far(a1, a2, b.y) + mp["alpha"] * intra
    w = M.reliability_code(a1, a2, b.y, mp["tau_w"], ml)
    return (M.margin(b.z1, b.z2, b.y, w, mp["gamma"], ml, normalize="weights") + mp["alpha"] * intra
            + M.inter_code(b.z1, b.z2, b.y, mp["gamma"], mp["delta_shift"], ml))


def _reliability(z1: Any, z2: Any, y: Any, W: Any, mp: Mapping[str, Any], ml: bool) -> Any:
    import torch

    from paperflow.hashing import model as M

    if len(y) < 2:  # a one-pair batch has no z-score
        return torch.full((len(y),), 0.5)
    a1, a2 = _admissibility(z1, z2, y, W, mp, ml)
    return M.reliability_code(a1, a2, y, mp["tau_w"], ml)


METHOD = register(Method("rfcmh", loss=_loss, reliability=_reliability, warmup_key="warmup_epochs", role="proposed",
                         order=3, config_keys={**KEYS, "weight_decay": "train.weight_decay"}))
