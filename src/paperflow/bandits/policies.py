"""Bandit policies: BLCE, BLCE-G and baselines (linear rewards), in a registry.

Every policy logs the rounds at which a recomputed parameter estimate was put to use
(`update_log`); `n_updates` is counted from that log, never from the schedule. An update made at
the end of the last round is never used and is not logged.

BLCE, BLCE-G and the batched baselines are RECONSTRUCTIONS from the paper's abstract (spec §3–§5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import time

from paperflow.bandits.design import distributional_g_optimal, fit_softmax_policy, g_optimal, softmax_weights
from paperflow.bandits.grid import make_grid
from paperflow.core.registry import Registry

POLICIES: Registry[type["Policy"]] = Registry("bandit policy")


def quad(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Row-wise xᵀ W x (one BLAS matmul + a row sum)."""
    return ((X @ W) * X).sum(axis=1)


def argmax_tiebreak(v: np.ndarray, rng: np.random.Generator) -> int:
    m = v.max()
    idx = np.flatnonzero(v >= m - 1e-12 * max(1.0, abs(m)))
    return int(idx[0]) if idx.size == 1 else int(rng.choice(idx))


def sherman_morrison(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    u = W @ x
    return W - np.outer(u, u) / (1.0 + x @ u)


@dataclass
class Common:
    """Problem constants every policy may use (known to the learner)."""

    T: int
    K: int
    d: int
    seed: int
    lam: float = 1.0
    sigma: float = 1.0
    S: float = 1.0
    delta: float = 0.05


class Policy:
    name = "policy"

    def __init__(self, c: Common, **params: Any) -> None:
        self.c = c
        self.params = params
        self.rng = np.random.default_rng([c.seed, 7919])
        self.update_log: list[int] = []
        self.stats: dict[str, float] = {}
        self.flops = 0.0

    def select(self, t: int, X: np.ndarray) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def observe(self, t: int, x: np.ndarray, r: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def log_update(self, t: int) -> None:
        """Record that an estimate recomputed after round t is used from round t+1 on."""
        if t < self.c.T:
            self.update_log.append(t)

    def bump(self, key: str, v: float = 1.0) -> None:
        self.stats[key] = self.stats.get(key, 0.0) + v


def theory_beta(c: Common, t: int) -> float:
    """OFUL width β_t = σ√(2 log(1/δ) + d log(1 + t/(dλ))) + √λ S."""
    return c.sigma * math.sqrt(2 * math.log(1 / c.delta) + c.d * math.log(1 + t / (c.d * c.lam))) + math.sqrt(c.lam) * c.S


@POLICIES.register("linucb")
class LinUCB(Policy):
    """OFUL / LinUCB: θ̂ recomputed every round (T−1 used updates)."""

    name = "linucb"

    def __init__(self, c: Common, beta: float | None = None, beta_mode: str = "fixed", c_beta: float = 1.0) -> None:
        super().__init__(c)
        self.beta, self.beta_mode, self.c_beta = beta, beta_mode, c_beta
        self.W = np.eye(c.d) / c.lam
        self.b = np.zeros(c.d)
        self.theta = np.zeros(c.d)

    def width(self, t: int) -> float:
        return self.c_beta * (theory_beta(self.c, t) if self.beta_mode != "fixed" else float(self.beta))

    def select(self, t: int, X: np.ndarray) -> int:
        K, d = X.shape
        self.flops += 2 * K * d * d + 2 * K * d
        ucb = X @ self.theta + self.width(t) * np.sqrt(np.maximum(quad(X, self.W), 0.0))
        return argmax_tiebreak(ucb, self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        self.W = sherman_morrison(self.W, x)
        self.b += r * x
        self.theta = self.W @ self.b
        self.flops += 6 * self.c.d**2
        self.log_update(t)


@POLICIES.register("rs_oful")
class RarelySwitchingOFUL(Policy):
    """Rarely switching OFUL: recompute θ̂ (and the width's Gram) when log det V grows by log(1+C)."""

    name = "rs_oful"

    def __init__(self, c: Common, beta: float | None = None, beta_mode: str = "fixed", c_beta: float = 1.0,
                 C: float = 1.0) -> None:
        super().__init__(c)
        self.beta, self.beta_mode, self.c_beta, self.C = beta, beta_mode, c_beta, C
        self.W = np.eye(c.d) / c.lam  # running inverse Gram (reward-free)
        self.b = np.zeros(c.d)
        self.logdet = c.d * math.log(c.lam)
        self.logdet_last = self.logdet
        self.W_last = self.W.copy()
        self.theta = np.zeros(c.d)

    def select(self, t: int, X: np.ndarray) -> int:
        K, d = X.shape
        self.flops += 2 * K * d * d + 2 * K * d
        beta = self.c_beta * (theory_beta(self.c, t) if self.beta_mode != "fixed" else float(self.beta))
        ucb = X @ self.theta + beta * np.sqrt(np.maximum(quad(X, self.W_last), 0.0))
        return argmax_tiebreak(ucb, self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        self.logdet += math.log1p(float(x @ self.W @ x))  # matrix determinant lemma
        self.W = sherman_morrison(self.W, x)
        self.b += r * x
        self.flops += 6 * self.c.d**2
        if self.logdet > math.log1p(self.C) + self.logdet_last:
            self.theta = self.W @ self.b
            self.W_last = self.W.copy()
            self.logdet_last = self.logdet
            self.log_update(t)


class BatchedElimination(Policy):
    """The static-grid elimination skeleton shared by BLCE, BLCE-G and the batched baselines.

    Per interval m: fresh reward-free statistics W = (λI + Σ x xᵀ)^{-1} (updated every round) and a
    reward buffer b (read only at t_m). Arms are eliminated with every frozen (θ̂_j, W_j)
    (`elimination: all_frozen`) or only the latest (`latest`). Subclasses choose the arm in the
    surviving set A_t. At t_m (m < M): θ̂_m = W b — the interval's only parameter update.
    """

    name = "batched"
    cumulative_estimate = False  # stale_ucb uses all data so far

    def __init__(self, c: Common, beta: float | None = None, beta_mode: str = "fixed", c_beta: float = 1.0,
                 M: int | None = None, grid: str = "geometric", elimination: str = "all_frozen", **params: Any) -> None:
        super().__init__(c, **params)
        if elimination not in ("all_frozen", "latest"):
            raise ValueError(f"unknown elimination {elimination!r}")
        self.grid = make_grid(c.T, M, grid)
        self.M = len(self.grid)
        self.beta, self.beta_mode, self.c_beta, self.elimination = beta, beta_mode, c_beta, elimination
        self.frozen: list[tuple[np.ndarray, np.ndarray, float]] = []  # (θ̂_j, W_j, β_j)
        self.m = 0  # current interval index (0-based)
        self.V_cum = c.lam * np.eye(c.d)
        self.b_cum = np.zeros(c.d)
        self._start_interval()
        self.stats["max_sm_rel_err"] = 0.0

    # --- widths -------------------------------------------------------------------------------
    def interval_len(self, m: int) -> int:
        return self.grid[m] - (self.grid[m - 1] if m > 0 else 0)

    def width(self, m: int) -> float:
        c = self.c
        if self.beta_mode == "fixed":
            b = float(self.beta)
        elif self.beta_mode == "small_k":
            b = c.sigma * math.sqrt(2 * math.log(2 * c.K * c.T * self.M / c.delta)) + math.sqrt(c.lam) * c.S
        elif self.beta_mode == "large_k":
            L = self.interval_len(m)
            b = c.sigma * math.sqrt(2 * math.log(1 / c.delta) + c.d * math.log(1 + L / (c.d * c.lam))) + math.sqrt(c.lam) * c.S
        else:
            raise ValueError(f"unknown beta_mode {self.beta_mode!r}")
        return self.c_beta * b

    # --- interval bookkeeping -----------------------------------------------------------------
    def _start_interval(self) -> None:
        d = self.c.d
        self.W = np.eye(d) / self.c.lam
        self.V = self.c.lam * np.eye(d)
        self.b = np.zeros(d)

    def _stack_frozen(self) -> None:
        """Stack the frozen estimates so one matmul per round evaluates all of them."""
        frozen = self.frozen if self.elimination == "all_frozen" else self.frozen[-1:]
        self._Theta = np.stack([f[0] for f in frozen], axis=1)  # d×F
        self._Wcat = np.concatenate([f[1] for f in frozen], axis=1)  # d×(F·d)
        self._betas = np.array([f[2] for f in frozen])

    def survivors(self, X: np.ndarray) -> np.ndarray:
        """Indices of arms that survive elimination by every frozen (θ̂_j, W_j), applied in order."""
        idx = np.arange(X.shape[0])
        if not self.frozen:
            return idx
        K, d = X.shape
        F = self._Theta.shape[1]
        mean = X @ self._Theta  # K×F
        rad = self._betas * np.sqrt(np.maximum(((X @ self._Wcat).reshape(K, F, d) * X[:, None, :]).sum(-1), 0.0))
        self.flops += 2 * K * F * d * d
        for j in range(F):
            m, r = mean[idx, j], rad[idx, j]
            idx = idx[m + r >= (m - r).max()]
        return idx

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def select(self, t: int, X: np.ndarray) -> int:
        idx = self.survivors(X)
        self.bump("survivors", len(idx))
        return int(idx[self.choose(t, X, idx)])

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        self.W = sherman_morrison(self.W, x)
        self.V += np.outer(x, x)
        self.b += r * x  # buffered: read only at the interval's end
        self.V_cum += np.outer(x, x)
        self.b_cum += r * x
        self.flops += 8 * self.c.d**2
        if t == self.grid[self.m]:
            self._end_interval(t)

    def _end_interval(self, t: int) -> None:
        if self.m < self.M - 1:
            W_exact = np.linalg.inv(self.V)  # guard against Sherman–Morrison drift
            err = float(np.linalg.norm(W_exact - self.W) / np.linalg.norm(W_exact))
            self.stats["max_sm_rel_err"] = max(self.stats["max_sm_rel_err"], err)
            if err > 1e-8:
                raise FloatingPointError(f"Sherman–Morrison drift {err:.2e} > 1e-8 at t={t}")
            self.W = W_exact
            if self.cumulative_estimate:
                theta = np.linalg.solve(self.V_cum, self.b_cum)
            else:
                theta = self.W @ self.b
            self.frozen.append((theta, self.W.copy(), self.width(self.m)))
            self._stack_frozen()
            self.log_update(t)
        self.m += 1
        if self.m < self.M:
            self._start_interval()


@POLICIES.register("blce")
class BLCE(BatchedElimination):
    """BLCE [recon]: elimination + greedy max-uncertainty ‖x‖_W on the surviving set, with the
    interval's reward-free Gram updated every round (within-interval context adaptivity)."""

    name = "blce"

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        A = X[idx]
        self.flops += 2 * len(A) * self.c.d**2
        return argmax_tiebreak(quad(A, self.W), self.rng)


@POLICIES.register("nonadaptive")
class NonAdaptive(BatchedElimination):
    """Elimination as BLCE, then uniform over the surviving set."""

    name = "nonadaptive"

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        return int(self.rng.integers(len(idx)))


@POLICIES.register("batch_elim_g")
class BatchElimG(BatchedElimination):
    """Strictly batched, design-based: sample x_t from a per-round near-G-optimal design on A_t.
    The within-interval Gram never enters the rule."""

    name = "batch_elim_g"
    design_rho = 0.0

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        A = X[idx]
        des = g_optimal(A, eps=float(self.params.get("eps", 1.0)), max_iter=int(self.params.get("max_iter", 200)),
                        rho=self.design_rho)
        self.bump("design_iters", des.iters)
        if des.rank < self.c.d:
            self.bump("rank_deficient_designs")
        self.flops += des.iters * (2 * len(A) * des.rank**2 + des.rank**3)
        return int(self.rng.choice(len(A), p=des.pi))


@POLICIES.register("batch_elim_dg")
class BatchElimDG(BatchedElimination):
    """Strictly batched, distributional G-optimal design [recon of Ruan, Yang & Zhou 2021, simplified;
    spec §5]: the static-grid method whose design step BLCE removes.

    At each grid point t_m (m < M) the policy for interval m+1 is fitted on the last `n_fit` context
    sets of interval m (default ⌈2d² ln d⌉, at least 4d), each restricted to the arms that survive the
    new frozen state: product Frank–Wolfe on log det of the average design (ε, max_iter), then the
    softmax policy π(x|A) ∝ exp(η‖x‖²_{Λ̂⁻¹}) with η picked on those sets (design.fit_softmax_policy).
    Inside the interval the rule depends only on the current context and the frozen state (no
    within-interval Gram). Interval 1 has no contexts to fit on and plays uniformly over the arms.
    The fit runs inside `observe` at t_m, so it is part of the policy's measured time; its own time is
    also logged (`stats.design_fit_s`).
    """

    name = "batch_elim_dg"

    def __init__(self, c: Common, n_fit: int | None = None, eps: float = 0.1, max_iter: int = 500, **kw: Any) -> None:
        super().__init__(c, **kw)
        import scipy.linalg  # noqa: F401  (imported here, outside the timed loop, not in the first fit)
        import scipy.optimize  # noqa: F401

        d = c.d
        self.n_fit = int(n_fit) if n_fit else max(4 * d, math.ceil(2 * d * d * math.log(max(d, 2))))
        self.eps, self.max_iter = float(eps), int(max_iter)
        self.buf: list[np.ndarray] = []
        self.Linv: np.ndarray | None = None
        self.eta = 0.0
        for k in ("design_fits", "design_fit_s", "fw_iters", "dist_g", "dist_g_policy", "eta"):
            self.stats[k] = 0.0

    def select(self, t: int, X: np.ndarray) -> int:
        if t > self.grid[self.m] - self.n_fit and self.m < self.M - 1:
            self.buf.append(np.array(X, copy=True))  # reward-free: the next interval's design data
        return super().select(t, X)

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        if self.Linv is None:
            return int(self.rng.integers(len(idx)))
        A = X[idx]
        self.flops += 2 * len(A) * self.c.d**2 + 3 * len(A)
        return int(self.rng.choice(len(A), p=softmax_weights(A, self.Linv, self.eta)))

    def _end_interval(self, t: int) -> None:
        super()._end_interval(t)
        if self.m < self.M and self.buf:
            t0 = time.perf_counter()
            sets = [X[self.survivors(X)] for X in self.buf]
            des = fit_softmax_policy(sets, distributional_g_optimal(sets, eps=self.eps, max_iter=self.max_iter))
            d = self.c.d
            self.Linv = np.linalg.pinv(des.Lam + 1e-8 * np.eye(d))
            self.eta = des.eta
            n = sum(len(A) for A in sets)
            self.flops += des.iters * (2 * n * des.rank**2 + des.rank**3) + 7 * 2 * n * d * d
            self.bump("design_fits")
            self.bump("design_fit_s", time.perf_counter() - t0)
            self.bump("fw_iters", des.iters)
            self.stats["dist_g"], self.stats["dist_g_policy"], self.stats["eta"] = des.g, des.g_policy, des.eta
            self.buf = []


@POLICIES.register("blce_g")
class BLCEG(BatchElimG):
    """BLCE-G [recon]: BLCE's loop with the max-uncertainty vertex replaced by sampling from a
    near-G-optimal design on the surviving set (`design: per_round`), or from the regularised design
    maximising log det(ρI + V(π)) (`design: regularized`). With `per_round` the decision rule
    coincides with batch_elim_g: the reconstruction cannot tell them apart."""

    name = "blce_g"

    def __init__(self, c: Common, design: str = "per_round", rho: float = 0.0, **kw: Any) -> None:
        super().__init__(c, **kw)
        if design not in ("per_round", "regularized"):
            raise ValueError(f"unknown design {design!r}")
        self.design_rho = float(rho) if design == "regularized" else 0.0


@POLICIES.register("stale_ucb")
class StaleUCB(BatchedElimination):
    """Labelled variant, not from the paper: argmax ⟨θ̂_last, x⟩ + β‖x‖_{W_cum} on the surviving
    set, θ̂ recomputed on all data at grid points only, W_cum the cumulative reward-free Gram."""

    name = "stale_ucb"
    cumulative_estimate = True

    def __init__(self, c: Common, **kw: Any) -> None:
        super().__init__(c, **kw)
        self.W_cum = np.eye(c.d) / c.lam

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        A = X[idx]
        theta = self.frozen[-1][0] if self.frozen else np.zeros(self.c.d)
        self.flops += 2 * len(A) * self.c.d**2
        return argmax_tiebreak(A @ theta + self.width(self.m) * np.sqrt(np.maximum(quad(A, self.W_cum), 0.0)), self.rng)

    def observe(self, t: int, x: np.ndarray, r: float) -> None:
        self.W_cum = sherman_morrison(self.W_cum, x)
        super().observe(t, x, r)


@POLICIES.register("blce_thresh")
class BLCEThresh(BatchedElimination):
    """Labelled variant, not from the paper: explore by max-uncertainty only while
    β‖x‖_W > c·β√(d/L_m); otherwise play greedy argmax ⟨θ̂_last, x⟩ on the surviving set."""

    name = "blce_thresh"

    def choose(self, t: int, X: np.ndarray, idx: np.ndarray) -> int:
        A = X[idx]
        u = np.sqrt(np.maximum(quad(A, self.W), 0.0))
        self.flops += 2 * len(A) * self.c.d**2
        if not self.frozen:
            return argmax_tiebreak(u, self.rng)
        thr = float(self.params.get("thresh_c", 3.0)) * math.sqrt(self.c.d / self.interval_len(self.m))
        if u.max() > thr:
            self.bump("explore_rounds")
            return argmax_tiebreak(u, self.rng)
        return argmax_tiebreak(A @ self.frozen[-1][0], self.rng)


def make_policy(name: str, common: Common, params: dict[str, Any]) -> Policy:
    return POLICIES[name](common, **params)
