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
