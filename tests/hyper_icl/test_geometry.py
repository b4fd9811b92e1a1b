"""The Lorentz distance (float64, clamped): symmetry, zero diagonal, agreement with the Poincaré ball."""

import math

import pytest
import torch

from paperflow.hyper_icl.model import (fixed_map, layer_distance, lorentz_distance, lorentz_inner, lorentz_lift,
                                       lorentz_to_poincare, poincare_distance)


@pytest.mark.parametrize("c", [0.5, 1.0, 2.0])
def test_lift_lies_on_the_hyperboloid(c):
    v = torch.randn(50, 8, dtype=torch.float64)
    x = lorentz_lift(v, c)
    assert x.dtype == torch.float64
    assert torch.allclose(lorentz_inner(x, x), torch.full((50,), -1.0 / c, dtype=torch.float64), atol=1e-9)
    assert torch.all(x[:, 0] > 0)


@pytest.mark.parametrize("c", [0.5, 1.0, 2.0])
def test_distance_symmetric_zero_diagonal_and_matches_poincare(c):
    g = torch.Generator().manual_seed(0)
    v, w = torch.randn(40, 6, generator=g), torch.randn(40, 6, generator=g)
    x, y = lorentz_lift(v, c), lorentz_lift(w, c)
    d = lorentz_distance(x, y, c)
    assert d.dtype == torch.float64
    assert torch.allclose(d, lorentz_distance(y, x, c))
    assert torch.all(lorentz_distance(x, x, c) < 2e-3 / math.sqrt(c))  # arccosh(1 + 1e-6) ≈ 1.4e-3: the clamp
    dp = poincare_distance(lorentz_to_poincare(x, c), lorentz_to_poincare(y, c), c)
    assert torch.allclose(d, dp, rtol=1e-6, atol=1e-6)
    # the distance from the origin of the tangent vector v is √c·‖v‖/√c = ‖v‖ (the exponential map is radial)
    o = lorentz_lift(torch.zeros(1, 6, dtype=torch.float64), c)
    assert torch.allclose(lorentz_distance(o, x, c), v.double().norm(dim=-1), rtol=1e-6)


def test_clamp_keeps_gradients_finite_near_the_diagonal():
    v = torch.randn(5, 4, dtype=torch.float64)
    w = (v + 1e-9).requires_grad_(True)
    d = layer_distance(v, w, "lorentz", 1.0, 1e-6).sum()
    d.backward()
    assert torch.isfinite(w.grad).all()


def test_fixed_map_clips_to_r_max_and_cosh_stays_finite():
    h = torch.randn(10, 16) * 100
    v = fixed_map(h, torch.zeros(16), torch.ones(16), 1.0, 4.0)
    assert torch.all(v.norm(dim=-1) <= 4.0 + 1e-9)
    assert torch.isfinite(lorentz_lift(v, 1.0)).all()


def test_euclidean_control_is_the_plain_norm():
    v, w = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    assert torch.allclose(layer_distance(v, w, "euclidean", 1.0, 1e-6), (v - w).norm(dim=-1))
