"""Contextual bandit environments with common random numbers.

Contexts: `sphere` (uniform on S^{d−1}), `normal` (N(0, I/d) clipped to the unit ball) or
`anisotropic` (N(0, diag(s²)) with s_j = ratio^{−j/(d−1)}, projected onto the sphere: most arms point
along the first coordinates, so a uniform choice over arms explores the last ones poorly and the
design step has work to do).

Contexts and noise come in blocks of B rounds: rounds (j−1)B+1..jB are drawn from
`default_rng([seed, j])`, with B = max(1, 2¹⁸ // (K·d)) a function of the environment only. Every
algorithm therefore sees the same stream (common random numbers), round t's draw does not depend on
T, and no T×K×d tensor is materialised. (The spec's one-generator-per-round costs ~100 µs a round,
more than most policies' decisions; blocks keep the same guarantees.) θ* comes from
`default_rng([seed, 0])`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sigmoid(z: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-z))


def dsigmoid(z: np.ndarray | float) -> np.ndarray | float:
    s = sigmoid(z)
    return s * (1.0 - s)


@dataclass
class ContextualEnv:
    K: int
    d: int
    seed: int
    sigma: float = 1.0
    S: float = 1.0
    context: str = "sphere"  # sphere | normal | anisotropic
    aniso_ratio: float = 10.0  # anisotropic: coordinate j scaled by ratio^(-j/(d-1)) before normalising
    reward_model: str = "linear"  # linear | logistic

    def __post_init__(self) -> None:
        if self.context not in ("sphere", "normal", "anisotropic"):
            raise ValueError(f"unknown context distribution {self.context!r}")
        g = np.random.default_rng([self.seed, 0])
        th = g.standard_normal(self.d)
        self.theta = self.S * th / np.linalg.norm(th)
        self.block = max(1, 2**18 // (self.K * self.d))
        self._j = -1

    def _load_block(self, j: int) -> None:
        g = np.random.default_rng([self.seed, j + 1])
        B, K, d = self.block, self.K, self.d
        X = g.standard_normal((B, K, d))
        if self.context == "normal":  # N(0, I/d), clipped to the unit ball
            X /= np.sqrt(d)
            X /= np.maximum(1.0, np.linalg.norm(X, axis=2, keepdims=True))
        else:  # uniform on the sphere, or an anisotropic Gaussian projected onto it
            if self.context == "anisotropic" and d > 1:
                X *= self.aniso_ratio ** (-np.arange(d) / (d - 1))
            X /= np.linalg.norm(X, axis=2, keepdims=True)
        self._X = X
        self._noise = g.standard_normal(B) * self.sigma if self.reward_model == "linear" else g.random(B)
        self._j = j

    def round(self, t: int) -> tuple[np.ndarray, float]:
        """Contexts X_t (K×d, ‖x‖ ≤ 1) and the round's shared noise draw (η_t, or u_t ~ U(0,1))."""
        j, i = divmod(t - 1, self.block)
        if j != self._j:
            self._load_block(j)
        return self._X[i], float(self._noise[i])

    def mean_rewards(self, X: np.ndarray) -> np.ndarray:
        z = X @ self.theta
        return z if self.reward_model == "linear" else sigmoid(z)

    def reward(self, X: np.ndarray, a: int, noise: float) -> float:
        z = float(X[a] @ self.theta)
        if self.reward_model == "linear":
            return z + noise
        return float(noise < sigmoid(z))

    @property
    def kappa(self) -> float:
        """1 / min_{‖x‖≤1} μ'(⟨θ*, x⟩) = 1/μ'(S) (logistic rewards)."""
        return float(1.0 / dsigmoid(self.S))
