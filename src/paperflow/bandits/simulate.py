"""The decision loop: contexts → policy → reward → policy update, with separate timing of the
policy's work (decision + update) and the environment's (context generation, rewards)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from paperflow.bandits.envs import ContextualEnv
from paperflow.bandits.policies import Common, Policy, make_policy
from paperflow.core.progress import progress

# import for registration side effects
from paperflow.bandits import glm as _glm  # noqa: F401


def log_points(T: int, n: int = 60) -> list[int]:
    return sorted(set(np.unique(np.geomspace(1, T, n).astype(int)).tolist()) | {T})


@dataclass
class RunResult:
    regret_t: list[int]
    regret_curve: list[float]
    final_regret: float
    n_updates: int
    update_rounds: list[int]
    runtime_s: float
    ctx_time_s: float
    flops_per_round: float
    stats: dict[str, float]
    actions: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=np.int64))

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("actions", "update_rounds")}
        # the update log itself is kept (capped) so the count can be audited
        out["update_rounds_head"] = self.update_rounds[:64]
        return out


def run(env: ContextualEnv, policy: Policy, T: int,
        reward_transform: Callable[[int, float], float] | None = None, keep_actions: bool = False) -> RunResult:
    pts = log_points(T)
    want = iter(pts)
    nxt = next(want)
    curve: list[float] = []
    regret = 0.0
    t_alg = t_env = 0.0
    actions = np.empty(T, dtype=np.int64) if keep_actions else np.zeros(0, dtype=np.int64)
    pc = time.perf_counter
    for t in progress(range(1, T + 1), desc=f"{getattr(policy, 'name', 'policy')} T={T}", every_s=10.0):
        a0 = pc()
        X, noise = env.round(t)
        a1 = pc()
        a = policy.select(t, X)
        a2 = pc()
        mu = env.mean_rewards(X)
        regret += float(mu.max() - mu[a])
        r = env.reward(X, a, noise)
        if reward_transform is not None:
            r = reward_transform(t, r)
        a3 = pc()
        policy.observe(t, X[a], r)
        a4 = pc()
        t_env += (a1 - a0) + (a3 - a2)
        t_alg += (a2 - a1) + (a4 - a3)
        if keep_actions:
            actions[t - 1] = a
        if t == nxt:
            curve.append(regret)
            nxt = next(want, None)
    return RunResult(pts, curve, regret, len(policy.update_log), list(policy.update_log), t_alg, t_env,
                     policy.flops / T, dict(policy.stats), actions)


def run_one(regime: dict[str, Any], algo: str, algo_params: dict[str, Any], T: int, seed: int,
            env_params: dict[str, Any], **kw: Any) -> RunResult:
    """Build env + policy from plain parameters and run them (what a simulate job does per cell)."""
    env = ContextualEnv(K=regime["K"], d=regime["d"], seed=seed, **env_params)
    common = Common(T=T, K=regime["K"], d=regime["d"], seed=seed, lam=algo_params.pop("lam", 1.0),
                    sigma=env.sigma if env.reward_model == "linear" else 0.5, S=env.S,
                    delta=algo_params.pop("delta", 0.05))
    policy = make_policy(algo, common, algo_params)
    res = run(env, policy, T, **kw)
    res.stats["M"] = float(getattr(policy, "M", 0))
    if hasattr(policy, "grid"):
        res.stats["grid"] = list(policy.grid)  # type: ignore[assignment]
    return res
