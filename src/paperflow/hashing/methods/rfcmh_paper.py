"""`rfcmh_paper`: RFCMH as written in the paper [P] (spec §3): σ(zW/0.5) possibility, Eq. 1-2 FAR,
raw-gap reliability with δ, cross-modal-only intra denominators, the Eq. 8-9 inter loss, α on
intra + inter, weight decay `train.weight_decay_paper`; margin loss as a mean over pairs [R].
Runs only at `grid.paper_variant_bits` x `grid.paper_variant_modes`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.hashing.methods import Batch, Method, register

KEYS = {k: f"rfcmh.{k}" for k in ("alpha", "kappa", "q", "tau", "gamma", "delta_shift", "delta_paper", "proto_temp",
                                  "warmup_epochs")}


def _admissibility(z1: Any, z2: Any, y: Any, W: Any, mp: Mapping[str, Any], ml: bool) -> tuple[Any, Any]:
    from paperflow.hashing import model as M

    a1 = M.admissibility_paper(M.possibility_paper(z1, W, mp["proto_temp"]), y, mp["kappa"], ml)
    a2 = M.admissibility_paper(M.possibility_paper(z2, W, mp["proto_temp"]), y, mp["kappa"], ml)
    return a1, a2


def _loss(b: Batch) -> Any:
    from paperflow.hashing import model as M

    mp, ml = b.mp, b.multilabel
    a1, a2 = _admissibility(b.z1, b.z2, b.y, b.W, mp, ml)
    intra = M.intra_paper(b.z1, b.z2, mp["tau"], mp["q"])
    if b.epoch <= mp["warmup_epochs"]:
        return M.warm_far(a1, a2, b.y) + mp["alpha"] * intra
    w = M.reliability_paper(a1, a2, b.y, mp["delta_paper"], mp["tau"], ml)
    return (M.margin(b.z1, b.z2, b.y, w, mp["gamma"], ml, normalize="pairs")
            + mp["alpha"] * (intra + M.inter_paper(b.z1, b.z2, mp["gamma"], mp["delta_shift"], mp["tau"])))


def _reliability(z1: Any, z2: Any, y: Any, W: Any, mp: Mapping[str, Any], ml: bool) -> Any:
    from paperflow.hashing import model as M

    a1, a2 = _admissibility(z1, z2, y, W, mp, ml)
    return M.reliability_paper(a1, a2, y, mp["delta_paper"], mp["tau"], ml)


METHOD = register(Method("rfcmh_paper", loss=_loss, reliability=_reliability, warmup_key="warmup_epochs",
                         role="variant", order=4, only_bits_key="paper_variant_bits",
                         only_modes_key="paper_variant_modes",
                         config_keys={**KEYS, "weight_decay": "train.weight_decay_paper"}))
