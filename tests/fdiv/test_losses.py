"""The f-TB loss registry: exact float64 gradient identities (spec §5 T1-T6) for every registered loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from paperflow.fdiv import identity as I
from paperflow.fdiv.losses import DIVERGENCES, LOSSES, batch_loss, linex_g, profiled_alpha_loss

DIVS = DIVERGENCES.names()
ALPHA_DIVS = [d for d in DIVS if DIVERGENCES[d].alpha_linex is not None]
NON_LEARNED = [n for n in LOSSES.names() if not LOSSES[n].learned_logz]


def test_registry_covers_the_spec_rows():
    assert {"reverse_kl", "forward_kl", "hellinger", "pearson_chi2", "neyman_chi2", "js"} <= set(DIVS)
    assert {"rkl", "hellinger", "fkl", "chi2", "js", "tb"} <= set(LOSSES.names())
    for name in LOSSES.names():  # every loss points at a registered divergence
        assert LOSSES[name].divergence in DIVS


@pytest.mark.parametrize("div", DIVS)
def test_t1_onpolicy_population_gradient_equals_divergence_gradient(div):
    res = I.t1_population_identity(DIVERGENCES[div])
    for model, r in res.items():
        assert r["rel_err_logZ_centre"] < 1e-10, (model, r)
        if "rel_err_profiled_centre" in r:
            assert r["rel_err_profiled_centre"] < 1e-10, (model, r)
            assert r["scalar_profiled_centre"] > 0


@pytest.mark.parametrize("div", DIVS)
def test_g_second_is_e2s_f_second(div):
    """g'' = e^{2s} f''(e^s), g' = u f' - f + const, g(0) = g'(0) = 0, and g/g'/g'' agree by autograd."""
    err = I.correspondence_error(DIVERGENCES[div])
    assert max(err.values()) < 1e-9, err


@pytest.mark.parametrize("div", ALPHA_DIVS)
def test_alpha_rows_are_scaled_linex(div):
    d = DIVERGENCES[div]
    s = torch.linspace(-3, 3, 61, dtype=torch.float64)
    g_lin = linex_g(d.alpha_linex)[0](s)
    assert torch.allclose(d.g(s), d.scale * g_lin, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("div", DIVS)
def test_t2_wrong_centre(div):
    cos = I.t2_wrong_centre(DIVERGENCES[div], delta=0.7)
    if DIVERGENCES[div].alpha_linex is not None:  # any centre gives the right direction
        assert all(abs(1 - c) < 1e-12 for c in cos.values()), cos
    else:  # JS: a wrong centre changes the divergence (guards the log-partition centre)
        assert all(c < 1 - 1e-6 for c in cos.values()), cos


@pytest.mark.parametrize("loss", ["rkl", "hellinger", "fkl", "chi2", "js"])
def test_t3_batch_estimator_follows_divergence_gradient(loss):
    assert I.t3_batch_cosine(loss, n_batches=400, batch_size=512, seed=0) >= 0.99


@pytest.mark.parametrize("loss", NON_LEARNED)
def test_t4_translation_invariance(loss):
    r = I.t4_translation(loss, shift=3.7)
    assert r["value_abs_diff"] < 1e-12 and r["grad_max_abs_diff"] < 1e-12, r


@pytest.mark.parametrize("loss", LOSSES.names())
def test_t5_loss_is_zero_iff_log_ratio_constant(loss):
    r = I.t5_zero_iff_constant(loss)
    assert abs(r["value_constant"]) < 1e-12
    assert r["value_nonconstant"] > 1e-6


def test_t6_alpha_conventions():
    assert I.t6_conventions() == {"alpha_paper=0": "forward_kl", "alpha_paper=1": "reverse_kl",
                                  "alpha_paper=0.5": "hellinger"}


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.5, 1.0, 2.0])
def test_profiled_closed_form_is_the_minimum_over_centres(alpha):
    rng = np.random.default_rng(3)
    r = torch.tensor(rng.normal(size=40) * 1.3 + 0.4, dtype=torch.float64)
    g = linex_g(alpha)[0]
    best = minimize_scalar(lambda c: float(g(r - c).mean()), bracket=(-3, 3), tol=1e-12)
    assert float(profiled_alpha_loss(r, alpha)) == pytest.approx(best.fun, rel=1e-8, abs=1e-12)


def test_profiled_loss_is_stable_for_huge_log_ratios():
    r = torch.tensor([-900.0, 0.0, 850.0, 3.0], dtype=torch.float64, requires_grad=True)
    for name in ["rkl", "hellinger", "fkl", "chi2", "neyman", "js"]:
        obj, val = batch_loss(r, name)
        (gr,) = torch.autograd.grad(obj, r)
        assert torch.isfinite(val) and torch.isfinite(gr).all(), name


def test_logz_centre_gradient_form_matches_g_with_fixed_centre():
    """mean(sg(g'(r - c)) r) has the gradient of mean g(r - c) with c = sg(log mean e^r)."""
    rng = np.random.default_rng(5)
    base = torch.tensor(rng.normal(size=32), dtype=torch.float64)
    for name in ["js", "fkl_logz"]:
        spec = LOSSES[name]
        t1 = base.clone().requires_grad_(True)
        obj, _ = batch_loss(t1 * 1.0, spec)
        (g1,) = torch.autograd.grad(obj, t1)
        t2 = base.clone().requires_grad_(True)
        c = (torch.logsumexp(t2.detach(), 0) - math.log(32))
        (g2,) = torch.autograd.grad(spec.div.g(t2 - c).mean(), t2)
        assert torch.allclose(g1, g2, rtol=1e-10, atol=1e-13), name


def test_learned_centre_requires_log_z():
    with pytest.raises(ValueError):
        batch_loss(torch.zeros(4, dtype=torch.float64), "tb")


def test_config_schema_lists_exactly_the_registered_losses():
    """The schema's enum of loss names is generated from the registry package's files (x-enum-modules)."""
    from paperflow.core.config import load_schema

    items = load_schema()["properties"]["fdiv"]["properties"]["losses"]["items"]
    assert items["enum"] == LOSSES.names()
    for name in LOSSES.names():  # file name == registered name, and every fact comes from the entry
        spec = LOSSES[name]
        assert spec.name == name and spec.mode in ("seeking", "covering") and spec.description
