"""Experiment components: hypergrid environment + exact DP, GMM target and models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paperflow.fdiv import gmm, hypergrid
from paperflow.fdiv.hypergrid import HyperGrid, PolicyMLP, sample_trajectories


def test_hypergrid_modes_at_spec_cells():
    env = HyperGrid(8, 2, 1e-3, 0.5, 2.0)
    assert sorted(map(tuple, env.coords[env.modes].tolist())) == [(1, 1), (1, 6), (6, 1), (6, 6)]
    assert env.reward.max() == pytest.approx(1e-3 + 2.5)
    assert env.p.sum() == pytest.approx(1.0)


def test_hypergrid_exact_terminal_distribution_matches_sampling():
    env = HyperGrid(8, 2, 0.1, 0.5, 2.0)
    torch.manual_seed(0)
    table = PolicyMLP(env, 16, 1).log_pf_table().detach().numpy()
    q = env.terminal_distribution(table)
    assert q.sum() == pytest.approx(1.0, abs=1e-12)
    _, _, _, term = sample_trajectories(env, np.exp(table), 40000, np.random.default_rng(0))
    freq = np.bincount(term, minlength=env.n) / len(term)
    assert np.abs(freq - q).sum() < 0.05  # L1 between MC and DP (MC noise ~0.02 here)


def test_trajectory_balance_residual_is_constant_for_the_optimal_policy():
    """r(tau) = log R + log P_B - log P_F equals log Z for every trajectory of the flow-matching P_F."""
    env = HyperGrid(8, 2, 0.1, 0.5, 2.0)
    # optimal P_F for uniform P_B: F(s) = sum of R over descendants weighted by backward paths, by DP
    order = np.argsort(-env.level, kind="stable")
    flow = np.zeros(env.n)
    for s in order:  # F(s) = R(s) + sum_children F(c) P_B(s|c)
        flow[s] = env.reward[s] + sum(flow[c] / env.n_parents[c] for c in env.child[s] if c >= 0)
    pf = np.zeros((env.n, env.D + 1))
    for s in range(env.n):
        for d in range(env.D):
            c = env.child[s, d]
            if c >= 0:
                pf[s, d] = flow[c] / env.n_parents[c] / flow[s]
        pf[s, env.D] = env.reward[s] / flow[s]
    with np.errstate(divide="ignore"):
        q = env.terminal_distribution(np.log(pf))
    assert np.abs(q - env.p).sum() < 1e-10
    tid, st, ac, term = sample_trajectories(env, pf, 200, np.random.default_rng(1))
    log_pf = np.bincount(tid, weights=np.log(pf[st, ac]), minlength=200)
    moved = ac < env.D
    child = env.child[st[moved], ac[moved]]
    log_pb = np.bincount(tid[moved], weights=-np.log(env.n_parents[child]), minlength=200)
    r = env.log_reward[term] + log_pb - log_pf
    assert np.ptp(r) < 1e-10 and r[0] == pytest.approx(math.log(env.reward.sum()))


def test_hypergrid_behaviours_parse():
    assert hypergrid.parse_behaviour("lag20") == ("lag", 20)
    assert hypergrid.parse_behaviour("onpolicy") == ("onpolicy", 0)
    with pytest.raises(ValueError):
        hypergrid.parse_behaviour("on")


def test_gmm_target_normalised_and_grid_discretisation():
    t = gmm.MixtureTarget(8, 5.0, 0.3, "unequal", 3.0)
    c = gmm.grid_centres(200, 7.0)
    mass = torch.exp(t.log_prob(c)).sum() * (14 / 200) ** 2
    assert float(mass) == pytest.approx(1.0, abs=1e-3)
    assert torch.allclose(t.log_unnorm(c) - t.log_prob(c), torch.tensor(3.0, dtype=torch.float64))
    x = t.sample(20000, np.random.default_rng(0))
    frac = torch.bincount(t.mode_of(x), minlength=8).double() / 20000
    assert torch.allclose(frac, t.weights, atol=0.015)


def test_gaussian_model_log_prob_matches_torch():
    g = torch.Generator().manual_seed(0)
    m = gmm.GaussianModel(8, 7.0, g)
    with torch.no_grad():
        m.log_diag.copy_(torch.tensor([0.3, -0.2], dtype=torch.float64))
        m.off.fill_(0.7)
    L = torch.tensor([[math.exp(0.3), 0.0], [0.7, math.exp(-0.2)]], dtype=torch.float64)
    ref = torch.distributions.MultivariateNormal(m.mu.detach(), scale_tril=L)
    x = torch.randn(50, 2, dtype=torch.float64)
    assert torch.allclose(m.log_prob(x), ref.log_prob(x), atol=1e-12)


def test_flow_is_invertible_and_normalised():
    torch.manual_seed(0)
    f = gmm.FlowModel(8, 7.0, torch.Generator().manual_seed(1), n_couplings=4, hidden=16, base_std=2.0)
    for p in f.parameters():  # move away from the identity initialisation
        torch.nn.init.normal_(p, std=0.3)
    c = gmm.grid_centres(300, 12.0)
    with torch.no_grad():
        mass = torch.exp(f.log_prob(c)).sum() * (24 / 300) ** 2
        x = f.sample(5, torch.Generator().manual_seed(2))
        z = x
        for layer in reversed(f.layers):
            z, _ = layer.inverse(z)
        back = z
        for layer in f.layers:
            back, _ = layer(back)
    assert float(mass) == pytest.approx(1.0, abs=0.02)
    assert torch.allclose(back, x, atol=1e-10)


def test_tabular_offpolicy_gmm_run_improves_and_is_deterministic():
    p = dict(n_modes=8, radius=5.0, sigma=0.3, weights="equal", log_z_offset=3.0, grid=16, extent=7.0,
             proposal_std=6.0, stale_lag=5, steps=60, batch_size=128, eval_every=30, n_curve_samples=200,
             n_eval_samples=500, lr=0.3, lr_logz=0.1, model="tabular", loss="fkl")
    m1, d1 = gmm.train_one(p, "proposal", 0)
    m2, d2 = gmm.train_one(p, "proposal", 0)
    assert m1["l1_grid"] == m2["l1_grid"] and np.array_equal(d1, d2)
    assert m1["curve"][-1]["l1_grid"] < m1["curve"][0]["l1_grid"]
    assert d1.shape == (16, 16) and d1.sum() == pytest.approx(1.0)


def test_reparam_reverse_kl_baseline_reduces_reverse_kl():
    p = dict(n_modes=8, radius=5.0, sigma=0.3, weights="equal", log_z_offset=3.0, grid=16, extent=7.0,
             proposal_std=6.0, stale_lag=5, steps=150, batch_size=128, eval_every=150, n_curve_samples=2000,
             n_eval_samples=2000, lr=0.05, lr_logz=0.1, model="gaussian", loss="rkl")
    m, _ = gmm.train_one(p, "reparam", 0)
    assert m["curve"][-1]["kl_qp"] < m["curve"][0]["kl_qp"] - 1.0
