"""Generalized linear (logistic) bandits: BLCE-GLM [recon] and baselines (spec §6)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paperflow.bandits.envs import dsigmoid, sigmoid
from paperflow.bandits.policies import (
    POLICIES,
    BatchedElimination,
    Common,
    Policy,
    argmax_tiebreak,
    quad,
    sherman_morrison,
)


def logistic_mle(X: np.ndarray, r: np.ndarray, lam: float, theta0: np.ndarray | None = None,
                 max_iter: int = 25, tol: float = 1e-8) -> tuple[np.ndarray, int]:
    """argmin Σ ℓ_logistic(r, ⟨θ,x⟩) + (λ/2)‖θ‖² by Newton (IRLS), warm-started. Returns (θ, iters)."""
    d = X.shape[1]
    theta = np.zeros(d) if theta0 is None else theta0.copy()
    it = 0
    for it in range(1, max_iter + 1):
        z = X @ theta
        mu = sigmoid(z)
        grad = X.T @ (mu - r) + lam * theta
        H = (X * dsigmoid(z)[:, None]).T @ X + lam * np.eye(d)
        step = np.linalg.solve(H, grad)
        theta -= step
        if np.linalg.norm(step) < tol:
            break
    return theta, it


def kappa(S: float) -> float:
    return float(1.0 / dsigmoid(S))


@POLICIES.register("blce_glm")
class BLCEGLM(BatchedElimination):
    """BLCE for logistic rewards [recon]: regularised MLE on interval m's data at t_m (Newton,
    warm-started); inside intervals the reward-free Gram is unweighted with widths scaled by √κ
    (`weighting: none`) or curvature-weighted with the frozen θ̂_{m−1} (`weighting: curvature`).
    The first interval lasts at least c·κ·d·log T rounds (warm-up)."""

    name = "blce_glm"

    def __init__(self, c: Common, weighting: str = "none", warmup_c: float = 1.0, **kw: Any) -> None:
        super().__init__(c, **kw)
        if weighting not in ("none", "curvature"):
            raise ValueError(f"unknown weighting {weighting!r}")
        self.weighting = weighting
        self.kappa = kappa(c.S)
        warm = math.ceil(warmup_c * self.kappa * c.d * math.log(c.T))
        if self.M > 1:
            self.grid[0] = min(max(self.grid[0], warm), self.grid[1] - 1)
        self.Xbuf: list[np.ndarray] = []
        self.rbuf: list[float] = []
        self.theta_prev = np.zeros(c.d)
        self.stats.update(mle_solves=0.0, newton_iters=0.0)

    def width(self, m: int) -> float:
        w = super().width(m)
        return w * math.sqrt(self.kappa) if self.weighting == "none" else w

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        A = X[idx]
        self.flops += 2 * len(A) * self.c.d**2
        return argmax_tiebreak(quad(A, self.W), self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        w = 1.0 if self.weighting == "none" else float(dsigmoid(x @ self.theta_prev))
        xs = math.sqrt(w) * x
        self.W = sherman_morrison(self.W, xs)
        self.V += np.outer(xs, xs)
        self.Xbuf.append(x)
        self.rbuf.append(r)  # buffered: read only at t_m
        self.flops += 8 * self.c.d**2
        if t == self.grid[self.m]:
            self._end_interval(t)

    def _end_interval(self, t: int) -> None:
        if self.m < self.M - 1:
            self.W = np.linalg.inv(self.V)
            theta, its = logistic_mle(np.array(self.Xbuf), np.array(self.rbuf), self.c.lam, self.theta_prev)
            self.stats["mle_solves"] += 1
            self.stats["newton_iters"] += its
            self.theta_prev = theta
            self.frozen.append((theta, self.W.copy(), self.width(self.m)))
            self._stack_frozen()
            self.log_update(t)
        self.m += 1
        self.Xbuf, self.rbuf = [], []
        if self.m < self.M:
            self._start_interval()


@POLICIES.register("nonadaptive_glm")
class NonAdaptiveGLM(BLCEGLM):
    name = "nonadaptive_glm"

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        return int(self.rng.integers(len(idx)))


@POLICIES.register("glm_ucb_ons")
class GLMUCBONS(Policy):
    """Per-round GLM-UCB with one online-Newton step per round (T−1 used updates)."""

    name = "glm_ucb_ons"

    def __init__(self, c: Common, beta: float = 1.0, beta_mode: str = "fixed", c_beta: float = 1.0) -> None:
        super().__init__(c)
        if beta_mode != "fixed":
            raise ValueError("glm_ucb_ons supports beta_mode=fixed only")
        self.beta = c_beta * float(beta)
        self.Hinv = np.eye(c.d) / c.lam
        self.theta = np.zeros(c.d)
        self.stats["newton_iters"] = 0.0

    def select(self, t: int, X: np.ndarray) -> int:
        self.flops += 2 * X.shape[0] * self.c.d**2
        return argmax_tiebreak(X @ self.theta + self.beta * np.sqrt(np.maximum(quad(X, self.Hinv), 0.0)), self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        z = float(x @ self.theta)
        self.Hinv = sherman_morrison(self.Hinv, math.sqrt(float(dsigmoid(z))) * x)
        self.theta = self.theta - self.Hinv @ ((float(sigmoid(z)) - r) * x)
        self.stats["newton_iters"] += 1
        self.flops += 8 * self.c.d**2
        self.log_update(t)


@POLICIES.register("rs_glm")
class RarelySwitchingGLM(Policy):
    """Rarely switching GLM-UCB: full regularised MLE on all data whenever log det V grows by
    log(1+C); widths β√κ‖x‖_{V_last^{-1}}."""

    name = "rs_glm"

    def __init__(self, c: Common, beta: float = 1.0, beta_mode: str = "fixed", c_beta: float = 1.0, C: float = 1.0) -> None:
        super().__init__(c)
        if beta_mode != "fixed":
            raise ValueError("rs_glm supports beta_mode=fixed only")
        self.beta = c_beta * float(beta) * math.sqrt(kappa(c.S))
        self.C = C
        self.W = np.eye(c.d) / c.lam
        self.W_last = self.W.copy()
        self.logdet = self.logdet_last = c.d * math.log(c.lam)
        self.theta = np.zeros(c.d)
        self.Xs: list[np.ndarray] = []
        self.rs: list[float] = []
        self.stats.update(mle_solves=0.0, newton_iters=0.0)

    def select(self, t: int, X: np.ndarray) -> int:
        self.flops += 2 * X.shape[0] * self.c.d**2
        return argmax_tiebreak(X @ self.theta + self.beta * np.sqrt(np.maximum(quad(X, self.W_last), 0.0)), self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        self.logdet += math.log1p(float(x @ self.W @ x))
        self.W = sherman_morrison(self.W, x)
        self.Xs.append(x)
        self.rs.append(r)
        if self.logdet > math.log1p(self.C) + self.logdet_last:
            self.theta, its = logistic_mle(np.array(self.Xs), np.array(self.rs), self.c.lam, self.theta)
            self.stats["mle_solves"] += 1
            self.stats["newton_iters"] += its
            self.flops += its * 2 * len(self.Xs) * self.c.d**2
            self.W_last = self.W.copy()
            self.logdet_last = self.logdet
            self.log_update(t)
