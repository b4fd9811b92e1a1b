"""Experimental designs: the per-set G-optimal design and the distributional design of batch_elim_dg,
checked against scipy's general-purpose optimiser (log det maximised over softmax logits)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from paperflow.bandits.design import distributional_g_optimal, fit_softmax_policy, g_optimal, softmax_weights
from paperflow.bandits.envs import ContextualEnv
from paperflow.bandits.grid import default_M
from paperflow.bandits.simulate import run_one


def _unit(X):
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _aniso_sets(N, K, d, seed, ratio=10.0):
    X = np.random.default_rng(seed).standard_normal((N, K, d)) * ratio ** (-np.arange(d) / (d - 1))
    return list(_unit(X))


def _logdet(sets, pis):
    Lam = sum((A * p[:, None]).T @ A for A, p in zip(sets, pis)) / len(sets)
    return float(np.linalg.slogdet(Lam)[1])


def _reference_logdet(sets):
    """max over one distribution per set of log det Λ(π): scipy's L-BFGS on softmax logits with the
    analytic gradient (∂ log det Λ / ∂π_i(x) = ‖x‖²_{Λ⁻¹}/N)."""
    sizes = [len(A) for A in sets]
    cuts = np.cumsum(sizes)[:-1]
    X = np.concatenate(sets)

    def f(z):
        pis = [np.exp(u - u.max()) / np.exp(u - u.max()).sum() for u in np.split(z, cuts)]
        p = np.concatenate(pis)
        Lam = (X * p[:, None]).T @ X / len(sets)
        lev = ((X @ np.linalg.inv(Lam)) * X).sum(1) / len(sets)
        grad = np.concatenate([pi * (lv - pi @ lv) for pi, lv in zip(pis, np.split(lev, cuts))])
        return -float(np.linalg.slogdet(Lam)[1]), -grad

    res = minimize(f, np.zeros(sum(sizes)), jac=True, method="L-BFGS-B", options={"maxiter": 20000, "gtol": 1e-12})
    return -float(res.fun)


@pytest.mark.parametrize("N,K,d", [(1, 6, 3), (3, 4, 3), (6, 5, 2), (10, 20, 4)])
def test_distributional_design_matches_solver_reference(N, K, d):
    sets = _aniso_sets(N, K, d, seed=N + K)
    des = distributional_g_optimal(sets, eps=1e-2, max_iter=5000)
    for p in des.pis:
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0, abs=1e-12)
    # G-optimality gap (Kiefer–Wolfowitz for the product of simplices): E_i max ‖x‖²_{Λ⁻¹} − rank ≤ ε·rank
    gap = des.g - des.rank
    assert des.rank == d and gap <= 1e-2 * d
    # the gap certifies log det: 0 ≤ optimum − ours ≤ gap; the solver reference must agree
    ref = _reference_logdet(sets)
    ours = _logdet(sets, des.pis)
    assert ours <= ref + 1e-6
    assert ref - ours <= gap + 1e-6


def test_single_set_distributional_design_is_the_g_optimal_design():
    A = _aniso_sets(1, 8, 3, seed=3)[0]
    dist = distributional_g_optimal([A], eps=1e-2)
    single = g_optimal(A, eps=1e-2, max_iter=5000)
    assert single.pi.sum() == pytest.approx(1.0) and single.g <= 3 * (1 + 1e-2)
    assert dist.g <= 3 * (1 + 1e-2)
    assert _logdet([A], dist.pis) == pytest.approx(_logdet([A], [single.pi]), abs=0.03)


def test_design_matters_on_anisotropic_contexts_and_softmax_policy_generalises():
    """On anisotropic contexts the uniform policy is far from G-optimal; the fitted design reaches the
    bound, and the softmax policy fitted on one sample of context sets does well on a fresh sample."""
    fit_sets, new_sets = _aniso_sets(60, 30, 5, seed=5, ratio=30.0), _aniso_sets(60, 30, 5, seed=6, ratio=30.0)
    uniform = distributional_g_optimal(fit_sets, eps=1e-3, max_iter=0 + 1)  # one evaluation at the uniform start
    des = fit_softmax_policy(fit_sets, distributional_g_optimal(fit_sets, eps=0.05, max_iter=2000))
    assert des.g <= 5 * 1.05 < uniform.g
    Linv = np.linalg.inv(des.Lam + 1e-8 * np.eye(5))
    pis = [softmax_weights(A, Linv, des.eta) for A in new_sets]
    Lp = sum((A * p[:, None]).T @ A for A, p in zip(new_sets, pis)) / len(new_sets)
    g_new = float(np.mean([((A @ np.linalg.inv(Lp)) * A).sum(1).max() for A in new_sets]))
    u_new = distributional_g_optimal(new_sets, eps=1e-3, max_iter=1).g
    assert g_new < u_new


def test_batch_elim_dg_fits_once_per_interval_and_counts_updates():
    T = 3000
    res = run_one({"K": 30, "d": 4}, "batch_elim_dg", {"beta": 1.0}, T, 2, {"context": "anisotropic"})
    M = default_M(T)
    assert res.n_updates == M - 1
    assert res.stats["design_fits"] == M - 1 and res.stats["design_fit_s"] > 0
    assert res.stats["dist_g"] <= 4 * (1 + 0.1) + 1e-9  # ε = 0.1 by default


def test_anisotropic_contexts_are_unit_norm_and_anisotropic():
    env = ContextualEnv(K=50, d=6, seed=0, context="anisotropic", aniso_ratio=10.0)
    X = np.concatenate([env.round(t)[0] for t in range(1, 200)])
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0)
    second_moment = (X**2).mean(axis=0)
    assert second_moment[0] > 10 * second_moment[-1]
