"""MPS and MRS: the official formulas, restated, checked on hand-built cases and the tiny backbone."""

from __future__ import annotations

import pytest
import torch

from paperflow.mpdpac.fixes import (MRS_GAMMA, Prior, calibrated_prior, mps_apply, mrs_scale, paper_prior,
                                    prior_states, random_prior, rotary_scaled)
from paperflow.mpdpac.model import build_inputs


def _prior(D: int = 6) -> Prior:
    U = torch.eye(D)[:, :2]  # subspace = first two coordinates
    return Prior(torch.zeros(D), U, torch.tensor([1.0, 0.0]), "paper")


def test_mps_removes_only_the_u_component_scaled_by_clipped_cos():
    pr = _prior()
    h = torch.tensor([[[3.0, 4.0, 1.0, 2.0, 0.0, 5.0],      # cos(z, u) = 3/5 → a = λ·0.6
                       [-3.0, 4.0, 1.0, 0.0, 0.0, 0.0],     # anti-aligned: a = 0, unchanged
                       [3.0, 4.0, 1.0, 2.0, 0.0, 5.0]]])    # not masked: unchanged
    masked = torch.tensor([[True, True, False]])
    new, a = mps_apply(h, masked, pr, lam=1.0)
    assert a[0].tolist() == pytest.approx([0.6, 0.0, 0.0], abs=1e-5)
    # z = (3, 4); z·u = 3 → the u component shrinks by a: 3 − 0.6·3 = 1.2; everything else is kept
    assert new[0, 0].tolist() == pytest.approx([1.2, 4.0, 1.0, 2.0, 0.0, 5.0], abs=1e-5)
    assert torch.equal(new[0, 1:], h[0, 1:])
    same, a0 = mps_apply(h, masked, pr, lam=0.0)
    assert torch.equal(same, h) and not a0.any()


def test_mps_full_alignment_and_lambda_one_removes_the_prior_direction():
    pr = _prior()
    h = torch.tensor([[[2.0, 0.0, 7.0, 0.0, 0.0, 1.0]]])
    new, a = mps_apply(h, torch.tensor([[True]]), pr, lam=1.0)
    assert float(a) == pytest.approx(1.0, abs=1e-5)
    assert float(((new - pr.mu) @ pr.U @ pr.u).squeeze()) == pytest.approx(0.0, abs=1e-4)  # u component gone
    assert new[0, 0, 2:].tolist() == [7.0, 0.0, 0.0, 1.0]


def test_paper_prior_is_orthonormal_with_k_capped(tiny_model):
    H = prior_states(tiny_model)
    assert H.shape == (3, 16)  # one state per layer
    pr = paper_prior(tiny_model, k=3)
    assert pr.U.shape == (16, 2)  # k capped at n_layers − 1 = 2
    assert torch.allclose(pr.U.T @ pr.U, torch.eye(2), atol=1e-5)
    assert float(pr.u.norm()) == pytest.approx(1.0, abs=1e-5)
    assert torch.allclose(pr.mu, H.mean(0))
    # u is the direction of the last layer's centred state inside the subspace
    z = (H[-1] - pr.mu) @ pr.U
    assert torch.allclose(pr.u, z / z.norm(), atol=1e-5)


def test_prior_pass_feeds_the_mean_embedding_alone(tiny_model):
    """The override replaces the input embedding: the pass equals running e through the blocks by hand."""
    e = tiny_model.embedding_matrix().mean(0)
    net = tiny_model.net
    cos, sin = net.rotary.tables(torch.arange(1))
    x = e[None, None]
    for blk in net.blocks:
        x, _ = blk(x, cos, sin, None)
    assert torch.allclose(prior_states(tiny_model)[-1], net.norm(x)[0, 0], atol=1e-5)


def test_random_and_calibrated_priors(tiny_model):
    pr = paper_prior(tiny_model, k=2)
    r1, r2 = random_prior(pr, 1), random_prior(pr, 1)
    assert torch.equal(r1.U, r2.U) and not torch.allclose(r1.U, pr.U)
    assert torch.allclose(r1.U.T @ r1.U, torch.eye(2), atol=1e-5) and torch.equal(r1.mu, pr.mu)
    states = pr.mu + torch.randn(50, 2) @ pr.U.T * 0.01 + 3.0 * (pr.U @ torch.tensor([0.6, -0.8]))
    cal = calibrated_prior(pr, states)
    assert cal.u.tolist() == pytest.approx([0.6, -0.8], abs=0.02)


def test_mrs_scale_follows_the_code():
    s0 = mrs_scale(16, 0.0, 8.0, 0.6)
    assert torch.equal(s0, torch.ones(8))
    s = mrs_scale(16, 1.0, 8.0, 0.6)
    assert (s[1:] >= s[:-1]).all()  # monotonic in the pair index (low frequencies scaled most)
    assert float(s.max()) <= 1 + MRS_GAMMA + 1e-6 and float(s[-1]) == pytest.approx(
        1 + MRS_GAMMA * float(torch.sigmoid(torch.tensor(8.0 * 0.4))), abs=1e-6)
    assert torch.equal(mrs_scale(16, 5.0, 8.0, 0.6), s)  # β clamped to [0, 1]
    assert not torch.equal(mrs_scale(16, 1.0, 12.0, 0.6), s)  # the cache is keyed on η too
    assert not torch.equal(mrs_scale(16, 1.0, 8.0, 0.3), s)  # ... and τ0
    off = mrs_scale(16, 0.0, 8.0, 0.6, s_max=2.0)
    assert float(off.max()) > 1.9


def test_rotary_scaled_changes_attention_and_restores(tiny_model):
    ids, _ = build_inputs(torch.tensor([[5, 6, 3, 3, 3, 3, 3, 3, 7]]), 6, 2, 0, 3)
    before = tiny_model.rotary_inv_freq().clone()
    ref = tiny_model.states(ids).layer_states[-1]
    with rotary_scaled(tiny_model, mrs_scale(8, 0.0, 8.0, 0.6)):
        assert torch.allclose(tiny_model.states(ids).layer_states[-1], ref)
    with rotary_scaled(tiny_model, mrs_scale(8, 0.0, 8.0, 0.6, s_max=2.0)):
        assert torch.allclose(tiny_model.rotary_inv_freq(), before * mrs_scale(8, 0.0, 8.0, 0.6, s_max=2.0))
        diff = (tiny_model.states(ids).layer_states[-1] - ref).abs().max()
        assert diff > 1e-5  # an untrained net attends almost uniformly: the change is small but real
    assert torch.equal(tiny_model.rotary_inv_freq(), before)
