"""The entropic JKO solver: mass, energy descent, separable = dense kernel, approach to Gibbs, autograd."""

from __future__ import annotations

import torch

from paperflow.docloc.jko import (Grid, JKOParams, apply_kernel, energy, gibbs, jko_step, sinkhorn_divergence,
                                  transport_cost)


def _potential(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, n, n, generator=g, dtype=torch.float64)


def _uniform(n: int) -> torch.Tensor:
    return torch.full((1, n, n), 1.0 / (n * n), dtype=torch.float64)


def test_separable_kernel_equals_dense_kernel():
    grid = Grid(8, 8)
    ky, kx = grid.kernels(0.01)
    m = torch.rand(3, 8, 8, dtype=torch.float64)
    dense = (grid.dense_kernel(0.01) @ m.reshape(3, 64, 1)).reshape(3, 8, 8)
    assert torch.allclose(apply_kernel(ky, kx, m), dense, rtol=0, atol=1e-12)


def test_mass_is_conserved_after_inner_convergence():
    n = 32
    p = JKOParams(tau=0.05, eps=0.004, beta=0.2, iters=200)
    rho = _uniform(n)
    V = _potential(n)
    for _ in range(3):
        rho = jko_step(rho, V, p)
        assert abs(float(rho.sum()) - 1.0) < 1e-6
        assert float(rho.min()) >= 0


def test_energy_is_non_increasing_over_steps():
    n = 32
    p = JKOParams(tau=0.05, eps=0.004, beta=0.2, iters=100)
    V = _potential(n, 1)
    rho = _uniform(n)
    prev = float(energy(rho, V, p.beta))
    for _ in range(40):
        rho = jko_step(rho, V, p)
        cur = float(energy(rho, V, p.beta))
        assert cur <= prev + 1e-6
        prev = cur


def test_flow_approaches_the_gibbs_density():
    n = 32
    p = JKOParams(tau=0.05, eps=0.004, beta=0.2, iters=60)
    V = _potential(n, 2)
    target = gibbs(V, p.beta)
    rho = _uniform(n)
    dists = [float((rho - target).abs().sum())]
    for k in range(120):
        rho = jko_step(rho, V, p)
        if (k + 1) % 30 == 0:
            dists.append(float((rho - target).abs().sum()))
    assert all(b < a for a, b in zip(dists, dists[1:])), dists
    assert dists[-1] < 0.5 * dists[0]


def test_one_step_moves_mass_locally_coarse_to_fine():
    """A small τ moves mass only about √τ per step: after one step from a blob, mass far away is small."""
    n = 32
    ys = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    yy, xx = torch.meshgrid(ys, ys, indexing="ij")
    blob = torch.exp(-((yy - 0.25) ** 2 + (xx - 0.25) ** 2) / (2 * 0.05 ** 2))[None]
    blob = blob / blob.sum()
    V = (((yy - 0.8) ** 2 + (xx - 0.8) ** 2) * 10)[None]  # minimum far away
    small = jko_step(blob, V, JKOParams(tau=0.002, eps=0.003, beta=0.05, iters=100))
    big = jko_step(blob, V, JKOParams(tau=0.2, eps=0.003, beta=0.05, iters=100))
    far = (yy > 0.6) & (xx > 0.6)
    assert float(small[0][far].sum()) < float(big[0][far].sum())


def test_unrolled_step_is_differentiable():
    n = 16
    V = _potential(n, 3).requires_grad_(True)
    rho = jko_step(_uniform(n), V, JKOParams(tau=0.02, eps=0.01, beta=0.2, iters=20))
    target = torch.zeros_like(rho)
    target[0, 3, 4] = 1.0
    loss = -(rho * target).sum()
    loss.backward()
    assert V.grad is not None and torch.isfinite(V.grad).all() and float(V.grad.abs().sum()) > 0


def test_sinkhorn_quantities():
    n = 16
    a = torch.rand(2, n, n, dtype=torch.float64)
    a = a / a.sum((-2, -1), keepdim=True)
    b = torch.roll(a, shifts=4, dims=-1)
    assert torch.allclose(sinkhorn_divergence(a, a, 0.01), torch.zeros(2, dtype=torch.float64), atol=1e-9)
    assert (sinkhorn_divergence(a, b, 0.01) > 0).all()
    # a point mass moved by d cells costs about (d/n)² (entropic blur adds ~ε)
    p = torch.zeros(1, n, n, dtype=torch.float64)
    q = torch.zeros(1, n, n, dtype=torch.float64)
    p[0, 8, 2] = 1
    q[0, 8, 10] = 1
    c = float(transport_cost(p, q, 0.002, iters=200))
    assert abs(c - (8 / n) ** 2) < 0.01
