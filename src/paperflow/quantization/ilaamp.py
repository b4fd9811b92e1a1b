"""ILA-AMP (spec §5): adjacent-layer sensitivity sweep on validation windows and the chain DP that
allocates per-block activation bit-widths under an average budget."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from paperflow.core.progress import progress
from paperflow.quantization.evaluate import all_layer_inputs, nll_from_layer, run_block
from paperflow.quantization.qmodel import set_activation_bits


@torch.no_grad()
def sensitivity_sweep(model, windows: torch.Tensor, bits: list[int], base_bits: int = 8, clip: float = 0.9,
                      batch: int = 8) -> dict:
    """δ_i(b) and κ_i(b', b) for b, b' in `bits` (base_bits excluded: δ(base)=κ(·,base)=0).
    Runs on the model as given (rotated FP at the official order). Uses prefix caching: blocks
    before the changed ones see the baseline, so the pass restarts at the first changed block."""
    L = len(model.model.layers)
    sweep = [b for b in bits if b != base_bits]
    base = [base_bits] * L
    set_activation_bits(model, base, default_clip=clip)
    cache = all_layer_inputs(model, windows, batch, store_device="cpu")  # host memory; no-op on a CPU model
    nll0 = nll_from_layer(model, 0, cache[0], windows)
    delta = {i: {base_bits: 0.0} for i in range(L)}
    pair_nll: dict[tuple[int, int, int], float] = {}
    # Block i at width b is run once from its cached input; that output serves the single setting (i, b) and
    # every pair setting (i at b, i+1 at b2), which would otherwise recompute block i (issue 24: same floats,
    # one block pass fewer per pair). Only one block output is held at a time.
    order = [(i, b, b2) for i in range(L) for b in sweep for b2 in [None] + (sweep if i + 1 < L else [])]
    out_i = None
    for i, b, b2 in progress(order, desc="sens sweep"):
        cfg = list(base)
        cfg[i] = b
        if b2 is None:  # the single setting (i, b); its block-i output is kept for the pairs that follow
            set_activation_bits(model, cfg, default_clip=clip)
            out_i = run_block(model, i, cache[i])
            delta[i][b] = nll_from_layer(model, i + 1, out_i, windows) - nll0
        else:  # the pair setting (i at b, i+1 at b2), continued from block i's output at b
            cfg[i + 1] = b2
            set_activation_bits(model, cfg, default_clip=clip)
            pair_nll[(i + 1, b, b2)] = nll_from_layer(model, i + 1, out_i, windows)
    kappa = {i: {f"{bp},{b}": (pair_nll[(i, bp, b)] - nll0) - delta[i - 1][bp] - delta[i][b]
                 for bp in sweep for b in sweep} for i in range(1, L)}
    n_evals = 1 + len(sweep) * L + len(pair_nll)
    set_activation_bits(model, base, default_clip=clip)
    for i in range(1, L):  # pairs containing the base width follow from the singles: κ = 0
        for b in bits:
            kappa[i].setdefault(f"{base_bits},{b}", 0.0)
            kappa[i].setdefault(f"{b},{base_bits}", 0.0)
    return {"nll0": nll0, "base_bits": base_bits, "clip": clip, "bits": bits, "n_evals": n_evals,
            "delta": {str(i): {str(b): v for b, v in d.items()} for i, d in delta.items()},
            "kappa": {str(i): d for i, d in kappa.items()}}


def tables(sens: dict) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(δ [L, K], κ [L, K, K] with κ[0] = 0, bits) from sens.json content."""
    bits = sorted(int(b) for b in sens["bits"])
    L = len(sens["delta"])
    K = len(bits)
    d = np.zeros((L, K))
    k = np.zeros((L, K, K))
    for i in range(L):
        for a, b in enumerate(bits):
            d[i, a] = sens["delta"][str(i)][str(b)]
        if i >= 1:
            for a, bp in enumerate(bits):
                for c, b in enumerate(bits):
                    k[i, a, c] = sens["kappa"][str(i)][f"{bp},{b}"]
    return d, k, bits


def objective(assign: list[int], d: np.ndarray, k: np.ndarray, beta: float) -> float:
    return float(sum(d[i, a] for i, a in enumerate(assign)) + beta * sum(k[i, assign[i - 1], assign[i]] for i in range(1, len(assign))))


def chain_dp(d: np.ndarray, k: np.ndarray, bits: list[int], budget: int, beta: float) -> tuple[list[int], float]:
    """min Σδ_i(b_i) + β Σκ_i(b_{i−1}, b_i) s.t. Σ b_i ≤ budget. Returns (bit-widths, objective)."""
    L, K = d.shape
    INF = np.inf
    D = np.full((L, budget + 1, K), INF)
    back = np.full((L, budget + 1, K), -1, dtype=np.int64)
    for a, b in enumerate(bits):
        if b <= budget:
            D[0, b, a] = d[0, a]
    for i in range(1, L):
        for c in range(budget + 1):
            for a, b in enumerate(bits):
                if c - b < 0:
                    continue
                prev = D[i - 1, c - b] + beta * k[i, :, a]
                j = int(np.argmin(prev))
                if prev[j] < INF:
                    D[i, c, a] = d[i, a] + prev[j]
                    back[i, c, a] = j
    flat = D[L - 1]
    if not np.isfinite(flat).any():
        raise ValueError(f"budget {budget} infeasible for {L} blocks with bits {bits}")
    c, a = np.unravel_index(int(np.argmin(flat)), flat.shape)
    best = float(flat[c, a])
    assign = [0] * L
    for i in range(L - 1, -1, -1):
        assign[i] = int(a)
        pa = back[i, c, a]
        c -= bits[a]
        a = pa
    return [bits[a] for a in assign], best


def brute_force(d: np.ndarray, k: np.ndarray, bits: list[int], budget: int, beta: float) -> tuple[list[int], float]:
    L = d.shape[0]
    best = (None, np.inf)
    for assign in itertools.product(range(len(bits)), repeat=L):
        if sum(bits[a] for a in assign) > budget:
            continue
        v = objective(list(assign), d, k, beta)
        if v < best[1]:
            best = ([bits[a] for a in assign], v)
    return best
