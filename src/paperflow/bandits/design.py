"""Near-G-optimal experimental design on a finite arm set (Kiefer–Wolfowitz / Frank–Wolfe).

g(π) = max_x ‖x‖²_{V(π)^{-1}}, V(π) = Σ π(x) x xᵀ; optimum = rank(A). Fedorov–Wynn steps
γ = (g_k/d − 1)/(g_k − 1) on log det V(π); stop when g_k ≤ (1+ε) d or after max_iter.
`rho > 0` gives the regularised objective log det(ρI + V(π)) (Frank–Wolfe, step 2/(k+2)). Both
stop when the Frank–Wolfe gap max_x ∇_x − Σ_x π_x ∇_x ≤ ε·Σ_x π_x ∇_x (for ρ = 0 this is exactly
g ≤ (1+ε)·rank). Rank-deficient sets are handled in the span of A (d → rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Design:
    pi: np.ndarray  # weights over the rows of A
    g: float  # max_x ‖x‖²_{V(π)^{-1}} at the end (in the span)
    rank: int
    iters: int


def _span_basis(A: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    _, s, vt = np.linalg.svd(A, full_matrices=False)
    r = int((s > tol * max(1.0, s[0] if s.size else 0.0)).sum())
    return vt[:r].T  # d×r orthonormal basis of span(A)


def g_optimal(A: np.ndarray, eps: float = 1.0, max_iter: int = 200, rho: float = 0.0) -> Design:
    n, d = A.shape
    if n == 1:
        return Design(np.ones(1), 1.0, 1, 0)
    B = _span_basis(A)
    r = B.shape[1]
    Z = A @ B if r < d else A  # coordinates in the span
    pi = np.full(n, 1.0 / n)
    reg = (rho + 1e-10) * np.eye(r)
    it = 0
    g = np.inf
    for it in range(1, max_iter + 1):
        V = (Z * pi[:, None]).T @ Z + reg
        lev = ((Z @ np.linalg.inv(V)) * Z).sum(axis=1)
        k = int(np.argmax(lev))
        g = float(lev[k])
        avg = float(pi @ lev)
        if g - avg <= eps * avg:
            break
        gamma = (g / r - 1.0) / (g - 1.0) if rho == 0.0 else 2.0 / (it + 2.0)
        gamma = min(max(gamma, 0.0), 1.0)
        pi *= 1.0 - gamma
        pi[k] += gamma
    pi = np.maximum(pi, 0.0)
    pi /= pi.sum()
    return Design(pi, g, r, it)


# --- distributional G-optimal design (batch_elim_dg) ------------------------------------------------

@dataclass
class DistDesign:
    """A distributional design fitted on N sampled context sets A_1..A_N (each a survivor set).

    pis[i]: weights over the rows of A_i; Lam: Λ(π) = (1/N) Σ_i Σ_x π_i(x) x xᵀ (in ℝ^d);
    g: E_i max_{x∈A_i} ‖x‖²_{Λ⁻¹} (in the span; optimum = rank, by the Kiefer–Wolfowitz-type
    equivalence for the product of simplices); eta: the softmax temperature of the policy that
    generalises the design to unseen context sets; g_policy: the same criterion for that policy.
    """

    pis: list[np.ndarray]
    Lam: np.ndarray
    g: float
    rank: int
    iters: int
    eta: float = float("inf")
    g_policy: float = float("nan")
    Lam_policy: np.ndarray | None = None


def _logdet_step(Lam: np.ndarray, D: np.ndarray) -> float:
    """Exact line search: argmax_γ∈[0,1] log det((1−γ)Λ + γD), via the eigenvalues μ of Λ⁻¹D
    (f(γ) = Σ log(1 − γ + γ μ_j) + const, concave) and scipy's bounded scalar minimiser."""
    from scipy.linalg import eigh
    from scipy.optimize import minimize_scalar

    mu = eigh(D, Lam, eigvals_only=True)
    if float(np.mean(mu)) <= 1.0 + 1e-12:  # derivative at 0 is Σ(μ−1) ≤ 0: no ascent
        return 0.0
    res = minimize_scalar(lambda g: -float(np.sum(np.log(np.maximum(1.0 - g + g * mu, 1e-300)))),
                          bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-10})
    return float(res.x)


def distributional_g_optimal(sets: list[np.ndarray], eps: float = 0.1, max_iter: int = 500) -> DistDesign:
    """Product Frank–Wolfe on the average design of N context sets (Ruan, Yang & Zhou 2021, simplified).

    Maximises log det Λ(π) over one distribution per set, Λ(π) = (1/N) Σ_i Σ_x π_i(x) x xᵀ. The
    Frank–Wolfe vertex puts each set's mass on its argmax ‖x‖²_{Λ⁻¹}; the step is an exact line search.
    Stops when the duality gap E_i max_x ‖x‖²_{Λ⁻¹} − rank ≤ ε·rank (so g ≤ (1+ε)·rank) or after
    max_iter. Rank-deficient families are handled in the span of all the sets' rows.
    """
    if not sets:
        raise ValueError("distributional design needs at least one context set")
    N = len(sets)
    d = sets[0].shape[1]
    sizes = np.array([len(A) for A in sets])
    offs = np.concatenate([[0], np.cumsum(sizes)])
    Xall = np.concatenate(sets, axis=0)
    owner = np.repeat(np.arange(N), sizes)
    pi = np.concatenate([np.full(n, 1.0 / n) for n in sizes])
    w = pi / N  # weights of the stacked rows in Λ
    Lam0 = (Xall * w[:, None]).T @ Xall
    ev, U = np.linalg.eigh(Lam0)
    keep = ev > 1e-10 * max(1.0, float(ev[-1]))
    r = int(keep.sum())
    Z = Xall @ U[:, keep] if r < d else Xall  # coordinates in the span
    it, g = 0, np.inf
    for it in range(1, max_iter + 1):
        Lam = (Z * w[:, None]).T @ Z
        lev = ((Z @ np.linalg.inv(Lam)) * Z).sum(axis=1)
        # per-set argmax of the leverage (the Frank–Wolfe vertex of the product of simplices)
        best = np.maximum.reduceat(lev, offs[:-1])
        g = float(best.mean())
        if g <= (1.0 + eps) * r:
            break
        is_best = lev >= best[owner] - 1e-12 * np.maximum(1.0, best[owner])
        first = np.zeros_like(is_best)
        idx = np.flatnonzero(is_best)
        _, firsts = np.unique(owner[idx], return_index=True)
        first[idx[firsts]] = True  # one vertex per set
        zk = Z[first]
        D = zk.T @ zk / N
        gamma = _logdet_step(Lam, D)
        if gamma <= 0.0:
            break
        w *= 1.0 - gamma
        w[first] += gamma / N
    pis = [w[offs[i]:offs[i + 1]] * N for i in range(N)]
    pis = [p / p.sum() for p in pis]
    Lam_full = (Xall * w[:, None]).T @ Xall
    return DistDesign(pis, Lam_full, g, r, it)


ETA_GRID = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def softmax_weights(A: np.ndarray, Lam_inv: np.ndarray, eta: float) -> np.ndarray:
    """π(x | A) ∝ exp(η ‖x‖²_{Λ⁻¹}) over the rows of A."""
    s = eta * ((A @ Lam_inv) * A).sum(axis=1)
    s -= s.max()
    p = np.exp(s)
    return p / p.sum()


def fit_softmax_policy(sets: list[np.ndarray], des: DistDesign, etas: tuple[float, ...] = ETA_GRID,
                       reg: float = 1e-8) -> DistDesign:
    """Generalise a fitted distributional design to unseen context sets: the softmax policy
    π(x|A) ∝ exp(η‖x‖²_{Λ̂⁻¹}) with Λ̂ the design's matrix, η chosen on the fitting sets to minimise
    the distributional G-criterion E_i max_{x∈A_i} ‖x‖²_{Λ_η⁻¹}, Λ_η the policy's own average design
    (reward-free; spec §5's simplified Ruan et al. policy)."""
    d = des.Lam.shape[0]
    Lam_inv = np.linalg.pinv(des.Lam + reg * np.eye(d))
    N = len(sets)
    sizes = np.array([len(A) for A in sets])
    offs = np.concatenate([[0], np.cumsum(sizes)])[:-1]
    owner = np.repeat(np.arange(N), sizes)
    Xall = np.concatenate(sets, axis=0)
    lev0 = ((Xall @ Lam_inv) * Xall).sum(axis=1)
    best = (np.inf, 0.0, des.Lam)
    for eta in etas:
        s = eta * lev0
        s = np.exp(s - np.maximum.reduceat(s, offs)[owner])
        p = s / np.add.reduceat(s, offs)[owner]
        Lp = (Xall * p[:, None]).T @ Xall / N
        Li = np.linalg.pinv(Lp + reg * np.eye(d))
        gp = float(np.maximum.reduceat(((Xall @ Li) * Xall).sum(axis=1), offs).mean())
        if gp < best[0]:
            best = (gp, eta, Lp)
    des.g_policy, des.eta, des.Lam_policy = best[0], float(best[1]), best[2]
    return des
