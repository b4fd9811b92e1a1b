from __future__ import annotations

import math

import numpy as np
import pytest

from paperflow.bandits.design import g_optimal
from paperflow.bandits.envs import ContextualEnv
from paperflow.bandits.glm import logistic_mle
from paperflow.bandits.grid import default_M
from paperflow.bandits.policies import POLICIES, Common, LinUCB, make_policy
from paperflow.bandits.simulate import run, run_one

ELIM = ["blce", "blce_g", "batch_elim_g", "batch_elim_dg", "nonadaptive", "stale_ucb", "blce_thresh"]


class TwoArm:
    """Fixed contexts: arm 0 = e1 (mean 0.9), arm 1 = e2 (mean 0.1)."""

    reward_model = "linear"

    def __init__(self, seed):
        self.g = np.random.default_rng(seed)
        self.theta = np.array([0.9, 0.1])
        self.X = np.eye(2)

    def round(self, t):
        return self.X, float(self.g.normal() * 0.5)

    def mean_rewards(self, X):
        return X @ self.theta

    def reward(self, X, a, noise):
        return float(X[a] @ self.theta + noise)


def test_linucb_two_arms_picks_the_better_arm():
    T = 2000
    pol = LinUCB(Common(T=T, K=2, d=2, seed=0), beta=1.0)
    res = run(TwoArm(0), pol, T, keep_actions=True)
    assert np.mean(res.actions[T // 2:] == 0) > 0.95
    assert res.n_updates == T - 1


@pytest.mark.parametrize("algo", ELIM)
@pytest.mark.parametrize("T", [300, 3000])
def test_batched_update_count_is_M_minus_1(algo, T):
    res = run_one({"K": 10, "d": 3}, algo, {"beta": 1.0}, T, seed=1, env_params={})
    assert res.n_updates == default_M(T) - 1
    assert res.update_rounds == [int(x) for x in res.stats["grid"][:-1]]


def test_update_count_is_loglog():
    for T in (10**3, 10**4, 10**5, 10**6):
        assert default_M(T) - 1 <= 5
    ups = [run_one({"K": 5, "d": 2}, "blce", {"beta": 1.0}, T, 0, {}).n_updates for T in (100, 1000, 10000)]
    assert ups == [default_M(T) - 1 for T in (100, 1000, 10000)] and max(ups) <= 4


def test_rs_oful_switches_grow_slowly():
    c = [run_one({"K": 10, "d": 4}, "rs_oful", {"beta": 1.0, "C": 1.0}, T, 0, {}).n_updates for T in (500, 4000)]
    assert 0 < c[0] < c[1] < 4 * 4 * math.log(4000)  # O(d log T), far below T


@pytest.mark.parametrize("algo", ELIM)
def test_buffered_rewards_not_read_before_grid_point(algo):
    """Poisoning every reward after the last update must leave every action unchanged, and poisoning
    interval m's rewards must leave interval m's actions unchanged."""
    T = 1500
    base = run_one({"K": 12, "d": 3}, algo, {"beta": 1.0}, T, 4, {}, keep_actions=True)
    grid = [int(x) for x in base.stats["grid"]]
    last_update = grid[-2]
    poisoned = run_one({"K": 12, "d": 3}, algo, {"beta": 1.0}, T, 4, {}, keep_actions=True,
                       reward_transform=lambda t, r: 1e6 if t > last_update else r)
    assert np.array_equal(base.actions, poisoned.actions)
    # poison interval 2's rewards: actions up to its end identical, later ones may change
    lo, hi = grid[0], grid[1]
    p2 = run_one({"K": 12, "d": 3}, algo, {"beta": 1.0}, T, 4, {}, keep_actions=True,
                 reward_transform=lambda t, r: -1e3 if lo < t <= hi else r)
    assert np.array_equal(base.actions[:hi], p2.actions[:hi])
    assert not np.array_equal(base.actions, p2.actions)  # the poison is read at t_2, proving the test bites


def test_same_seed_same_result_and_crn():
    a = run_one({"K": 20, "d": 4}, "blce", {"beta": 0.5}, 800, 3, {})
    b = run_one({"K": 20, "d": 4}, "blce", {"beta": 0.5}, 800, 3, {})
    assert a.final_regret == b.final_regret and a.regret_curve == b.regret_curve
    e1, e2 = ContextualEnv(K=20, d=4, seed=3), ContextualEnv(K=20, d=4, seed=3)
    for t in (1, 7, 500, 77):  # any access order gives the same round
        assert np.array_equal(e1.round(t)[0], e2.round(t)[0])
    X, _ = e1.round(5)
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0)


def test_blce_eliminates_and_learns():
    """Over T rounds BLCE's regret grows sublinearly: the last interval's per-round regret is far below
    the first (pure-exploration) interval's."""
    T = 6000
    res = run_one({"K": 30, "d": 3}, "blce", {"beta": 0.5}, T, 2, {"sigma": 0.3})
    t = np.array(res.regret_t)
    c = np.array(res.regret_curve)
    g = res.stats["grid"]
    r_first = np.interp(g[0], t, c) / g[0]
    r_last = (c[-1] - np.interp(g[-2], t, c)) / (T - g[-2])
    assert r_last < 0.3 * r_first


def test_g_optimal_design_meets_kiefer_wolfowitz_bound():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 6))
    des = g_optimal(A, eps=0.1, max_iter=2000)
    assert des.rank == 6 and abs(des.pi.sum() - 1) < 1e-12 and (des.pi >= 0).all()
    V = (A * des.pi[:, None]).T @ A
    g = max(np.einsum("ij,jk,ik->i", A, np.linalg.inv(V), A))
    assert 6 - 1e-6 <= g <= 1.1 * 6 + 1e-6  # KW: optimum is d; we stop within (1+ε)d


def test_g_optimal_rank_deficient_works_in_span():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 5))  # rank 2 in R^5
    des = g_optimal(A)
    assert des.rank == 2 and des.g <= 2 * 2 + 1e-9


def test_logistic_mle_stationary():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    th = np.array([1.0, -0.5, 0.3])
    r = (rng.random(400) < 1 / (1 + np.exp(-X @ th))).astype(float)
    est, its = logistic_mle(X, r, lam=1.0)
    grad = X.T @ (1 / (1 + np.exp(-X @ est)) - r) + est
    assert np.linalg.norm(grad) < 1e-6 and its <= 25
    assert np.linalg.norm(est - th) < 0.5


@pytest.mark.parametrize("algo", ["blce_glm", "glm_ucb_ons", "rs_glm", "nonadaptive_glm"])
def test_glm_algorithms_run_with_logistic_rewards(algo):
    res = run_one({"K": 8, "d": 3}, algo, {"beta": 1.0}, 600, 0, {"reward_model": "logistic"})
    assert 0 <= res.final_regret < 600 * 0.5
    if algo in ("blce_glm", "nonadaptive_glm"):
        assert res.n_updates == default_M(600) - 1 and res.stats["mle_solves"] == res.n_updates


def test_registry_lists_all_policies():
    import paperflow.bandits.glm  # noqa: F401

    assert {"linucb", "rs_oful", "blce", "blce_g", "batch_elim_g", "nonadaptive", "blce_glm"} <= set(POLICIES.names())
    with pytest.raises(KeyError, match="unknown bandit policy"):
        make_policy("nope", Common(T=10, K=2, d=2, seed=0), {})
