"""Arm (vi): the fixed-potential mechanics rerun of spec §5 — no learning, only the flow.

Per page: a G×G grid with `blocks` rectangular blocks, one of them the evidence. The fine relevance of
a block is 1[evidence] + noise·N(0, 1) (hard negatives); empty cells have relevance −1; V = −relevance.
A coarse prior is a Gaussian blob (σ = prior_sigma page units) centred `off` page units away from the
evidence centre, in a random direction. Localisers, each scored by evidence-block accuracy (the block
holding the most mass is the evidence block):

- gibbs  : the one-step fine localiser ρ ∝ exp(−V/β)
- coarse : the blob alone
- poe    : ρ ∝ ρ_0 · exp(−V/β)        (the product of experts)
- jko    : K entropic JKO steps from ρ_0 = the blob under V, for every τ and K in the grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from paperflow.core.seeding import stream
from paperflow.docloc.jko import Grid, JKOParams, gibbs, jko_step


def pages(p: Mapping[str, Any], off: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V (P, G, G), block ids (P, G, G) with −1 for empty cells, prior (P, G, G)); block 0 is evidence."""
    G, P, nb = int(p["grid"]), int(p["pages"]), int(p["blocks"])
    rng = stream(int(p["seed"]), "mechanics", f"{off:g}")
    V = np.ones((P, G, G))
    ids = np.full((P, G, G), -1, np.int64)
    prior = np.zeros((P, G, G))
    c = (np.arange(G) + 0.5) / G
    for i in range(P):
        placed = 0
        for _ in range(2000):
            if placed == nb:
                break
            h, w = int(rng.integers(1, 3)), int(rng.integers(3, 9))
            y, x = int(rng.integers(0, G - h + 1)), int(rng.integers(0, G - w + 1))
            if (ids[i, max(0, y - 1):y + h + 1, max(0, x - 1):x + w + 1] >= 0).any():
                continue
            rel = (1.0 if placed == 0 else 0.0) + float(p["noise"]) * float(rng.standard_normal())
            ids[i, y:y + h, x:x + w] = placed
            V[i, y:y + h, x:x + w] = -rel
            if placed == 0:
                cy, cx = (y + h / 2) / G, (x + w / 2) / G
            placed += 1
        ang = float(rng.uniform(0, 2 * np.pi))
        my, mx = cy + off * np.sin(ang), cx + off * np.cos(ang)
        s = float(p["prior_sigma"])
        blob = np.exp(-((c[:, None] - my) ** 2 + (c[None, :] - mx) ** 2) / (2 * s * s))
        prior[i] = blob / blob.sum()
    return V, ids, prior


def block_accuracy(rho: np.ndarray, ids: np.ndarray, n_blocks: int) -> np.ndarray:
    """Per page: 1 if the block with the most mass is block 0 (the evidence)."""
    out = np.zeros(rho.shape[0])
    for i in range(rho.shape[0]):
        m = ids[i] >= 0
        mass = np.bincount(ids[i][m], weights=rho[i][m], minlength=n_blocks)
        out[i] = float(np.argmax(mass) == 0)
    return out


def run(p: Mapping[str, Any]) -> dict[str, Any]:
    """Per offset: per-page correctness of every localiser (lists of 0/1, paired by page)."""
    out: dict[str, Any] = {}
    beta, eps = float(p["beta"]), float(p["eps"])
    nb = int(p["blocks"])
    for off in p["offsets"]:
        V, ids, prior = pages(p, float(off))
        Vt, r0 = torch.from_numpy(V), torch.from_numpy(prior)
        res = {"gibbs": block_accuracy(gibbs(Vt, beta).numpy(), ids, nb),
               "coarse": block_accuracy(prior, ids, nb)}
        poe = prior * np.exp(-(V - V.min(axis=(1, 2), keepdims=True)) / beta)
        res["poe"] = block_accuracy(poe / poe.sum(axis=(1, 2), keepdims=True), ids, nb)
        kern = Grid(V.shape[1], V.shape[2]).kernels(eps)
        with torch.no_grad():
            for tau in p["taus"]:
                rho = r0.clone()
                jp = JKOParams(float(tau), eps, beta, int(p["iters"]))
                for k in range(1, max(int(x) for x in p["ks"]) + 1):
                    rho = jko_step(rho, Vt, jp, kernels=kern)
                    rho = rho / rho.sum((-2, -1), keepdim=True)
                    if k in [int(x) for x in p["ks"]]:
                        res[f"jko_t{float(tau):g}_K{k}"] = block_accuracy(rho.numpy(), ids, nb)
        out[f"{float(off):g}"] = {k: v.tolist() for k, v in res.items()}
    return {"per_page": out, "params": dict(p)}
