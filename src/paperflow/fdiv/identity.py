"""Exact checks of the loss/divergence correspondence on enumerable models, in float64 (spec §5).

T1  on-policy population identity: grad sum_x sg(q) g(r - log Z) == grad D_f (and, for the alpha
    family with the profiled centre, E_q[u^a] * grad L == grad D_a).
T2  any centre gives the right direction for the alpha family; for JS a wrong centre must not.
T3  the batch estimators (profiled / log-partition centre) average to the divergence gradient.
T4  translation invariance of the batch losses under log p~ -> log p~ + const.
T5  off-policy: a tabular model trained from a fixed full-support proposal recovers the target.
T6  alpha conventions: alpha_paper = 1 - alpha_linex.

The same functions back the unit tests (tests/fdiv/) and the pipeline stage `paperflow fdiv identity`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperflow.fdiv.losses import (
    DIVERGENCES,
    LOSSES,
    FDivergence,
    alpha_linex_from_paper,
    batch_loss,
    divergence_for_alpha_linex,
)

DT = torch.float64


# ---------------------------------------------------------------- enumerable models and targets
def tabular_problem(n: int = 12, seed: int = 0) -> tuple[Tensor, Tensor]:
    """(unnormalised log target, model logits) on n states; the target has a nonzero log Z."""
    g = torch.Generator().manual_seed(seed)
    logp_tilde = 1.5 * torch.randn(n, generator=g, dtype=DT) + 2.3
    logits = torch.randn(n, generator=g, dtype=DT)
    return logp_tilde, logits


def gauss_bins(n_bins: int = 64, lo: float = -6.0, hi: float = 6.0) -> Tensor:
    return torch.linspace(lo, hi, n_bins, dtype=DT)


def gauss_logq(theta: Tensor, x: Tensor) -> Tensor:
    """Discretised Gaussian over the bins x; theta = (mu, log sigma)."""
    mu, log_sigma = theta[0], theta[1]
    return torch.log_softmax(-0.5 * ((x - mu) / torch.exp(log_sigma)) ** 2, dim=0)


def two_mode_target(x: Tensor) -> Tensor:
    """Unnormalised log target on the bins: modes at -2.5 (w 0.7) and 3 (w 0.3), plus log Z = 1.1."""
    dens = 0.7 * torch.exp(-0.5 * ((x + 2.5) / 0.8) ** 2) + 0.3 * torch.exp(-0.5 * ((x - 3.0) / 0.6) ** 2)
    return torch.log(dens) + 1.1


# ---------------------------------------------------------------- exact quantities
def exact_divergence(div: FDivergence, logp_tilde: Tensor, logq: Tensor) -> Tensor:
    logp = logp_tilde - torch.logsumexp(logp_tilde, 0)
    u = torch.exp(logp - logq)
    return (torch.exp(logq) * div.f(u)).sum()


def population_surrogate(div: FDivergence, logp_tilde: Tensor, logq: Tensor, c: Tensor | float) -> Tensor:
    """sum_x sg(q(x)) g(r(x) - c): the on-policy population loss with samples held constant."""
    r = logp_tilde - logq
    return (torch.exp(logq).detach() * div.g(r - c)).sum()


def _grad(fn: Callable[[Tensor], Tensor], theta: Tensor) -> Tensor:
    t = theta.detach().clone().requires_grad_(True)
    (gr,) = torch.autograd.grad(fn(t), t)
    return gr


def rel_err(a: Tensor, b: Tensor) -> float:
    return float((a - b).norm() / b.norm())


def cosine(a: Tensor, b: Tensor) -> float:
    return float((a @ b) / (a.norm() * b.norm()))


def _models() -> dict[str, tuple[Tensor, Callable[[Tensor], Tensor], Tensor]]:
    """name -> (theta, logq(theta), log target)."""
    lpt, logits = tabular_problem()
    x = gauss_bins()
    return {
        "tabular12": (logits, lambda t: torch.log_softmax(t, 0), lpt),
        "gauss64": (torch.tensor([0.5, math.log(1.5)], dtype=DT), lambda t: gauss_logq(t, x), two_mode_target(x)),
    }


# ---------------------------------------------------------------- T1, T2
def t1_population_identity(div: FDivergence) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mname, (theta, logq_fn, lpt) in _models().items():
        log_z = torch.logsumexp(lpt, 0)
        g_d = _grad(lambda t: exact_divergence(div, lpt, logq_fn(t)), theta)
        g_l = _grad(lambda t: population_surrogate(div, lpt, logq_fn(t), log_z), theta)
        res = {"rel_err_logZ_centre": rel_err(g_l, g_d), "scalar_logZ_centre": 1.0}
        if div.alpha_linex is not None and div.alpha_linex != 0:
            a = div.alpha_linex
            logq = logq_fn(theta)
            logu = lpt - log_z - logq
            e_ua = float((torch.exp(logq) * torch.exp(a * logu)).sum())
            c_star = log_z + math.log(e_ua) / a
            g_p = _grad(lambda t: population_surrogate(div, lpt, logq_fn(t), c_star), theta)
            res["rel_err_profiled_centre"] = rel_err(e_ua * g_p, g_d)
            res["scalar_profiled_centre"] = e_ua
        elif div.alpha_linex == 0:
            # profiled centre of s^2/2 is E_q[r] and the scalar is 1: the centre does not matter
            c_star = float((torch.exp(logq_fn(theta)) * (lpt - logq_fn(theta))).sum())
            g_p = _grad(lambda t: population_surrogate(div, lpt, logq_fn(t), c_star), theta)
            res["rel_err_profiled_centre"] = rel_err(g_p, g_d)
            res["scalar_profiled_centre"] = 1.0
        out[mname] = res
    return out


def t2_wrong_centre(div: FDivergence, delta: float = 0.7) -> dict[str, float]:
    out = {}
    for mname, (theta, logq_fn, lpt) in _models().items():
        c = torch.logsumexp(lpt, 0) + delta
        g_d = _grad(lambda t: exact_divergence(div, lpt, logq_fn(t)), theta)
        g_l = _grad(lambda t: population_surrogate(div, lpt, logq_fn(t), c), theta)
        out[mname] = cosine(g_l, g_d)
    return out


def correspondence_error(div: FDivergence) -> dict[str, float]:
    """max |g'' - e^{2s} f''(e^s)|, max |(g' - (u f' - f)) - const| and |g - scale*linex| on s in [-4, 4]."""
    s = torch.linspace(-4, 4, 81, dtype=DT, requires_grad=True)
    u = torch.exp(s)
    # f', f'' by autograd of f
    uu = u.detach().clone().requires_grad_(True)
    fu = div.f(uu)
    (f1,) = torch.autograd.grad(fu.sum(), uu, create_graph=True)
    (f2,) = torch.autograd.grad(f1.sum(), uu)
    gp = div.gprime(s)
    (g2_auto,) = torch.autograd.grad(gp.sum(), s, retain_graph=True)
    gs = div.g(s)
    (g1_auto,) = torch.autograd.grad(gs.sum(), s)
    lhs = gp.detach() - (u.detach() * f1.detach() - fu.detach())
    out = {
        "g2_vs_f2": float((div.gsecond(s.detach()) - u.detach() ** 2 * f2).abs().max()),
        "g2_vs_autograd_g1": float((div.gsecond(s.detach()) - g2_auto).abs().max()),
        "g1_vs_autograd_g": float((gp.detach() - g1_auto).abs().max()),
        "g1_minus_uf1_f_not_const": float((lhs - lhs.mean()).abs().max()),
        "g_at_0": float(div.g(torch.zeros(1, dtype=DT)).abs()),
        "g1_at_0": float(div.gprime(torch.zeros(1, dtype=DT)).abs()),
    }
    return out


# ---------------------------------------------------------------- T3 batch estimator
def t3_batch_cosine(loss: str, n_batches: int = 400, batch_size: int = 512, seed: int = 0) -> float:
    """cos(mean over batches of grad batch_loss, grad D_f) for the misspecified discretised Gaussian."""
    spec = LOSSES[loss]
    x = gauss_bins()
    lpt = two_mode_target(x)
    theta = torch.tensor([0.5, math.log(1.5)], dtype=DT)
    g_d = _grad(lambda t: exact_divergence(spec.div, lpt, gauss_logq(t, x)), theta)
    rng = np.random.default_rng(seed)
    q = torch.exp(gauss_logq(theta, x)).numpy()
    acc = torch.zeros_like(theta)
    for _ in range(n_batches):
        idx = torch.as_tensor(rng.choice(len(q), size=batch_size, p=q / q.sum()))
        t = theta.clone().requires_grad_(True)
        r = lpt[idx] - gauss_logq(t, x)[idx]
        obj, _ = batch_loss(r, spec)
        (gr,) = torch.autograd.grad(obj, t)
        acc += gr
    return cosine(acc / n_batches, g_d)


# ---------------------------------------------------------------- T4 translation invariance
def t4_translation(loss: str, shift: float = 3.7) -> dict[str, float]:
    lpt, logits = tabular_problem()
    rng = np.random.default_rng(1)
    idx = torch.as_tensor(rng.integers(0, len(lpt), size=64))

    def val_grad(shift_: float) -> tuple[float, Tensor]:
        t = logits.clone().requires_grad_(True)
        r = (lpt + shift_)[idx] - torch.log_softmax(t, 0)[idx]
        obj, val = batch_loss(r, loss)
        (gr,) = torch.autograd.grad(obj, t)
        return float(val), gr

    v0, g0 = val_grad(0.0)
    v1, g1 = val_grad(shift)
    return {"value_abs_diff": abs(v1 - v0), "grad_max_abs_diff": float((g1 - g0).abs().max())}


# ---------------------------------------------------------------- T5 off-policy minimiser
def t5_offpolicy(loss: str, proposal: str, steps: int = 3000, batch_size: int = 256, lr: float = 0.05,
                 lr_logz: float = 0.1, seed: int = 0, concentration: float = 2.0) -> float:
    """Train a tabular model from a fixed proposal (uniform, or Dirichlet(concentration)); final L1(q, p)."""
    spec = LOSSES[loss]
    lpt, _ = tabular_problem()
    n = len(lpt)
    p = torch.softmax(lpt, 0)
    rng = np.random.default_rng(seed)
    prop = np.full(n, 1.0 / n) if proposal == "uniform" else rng.dirichlet(np.full(n, concentration))
    all_idx = torch.as_tensor(rng.choice(n, size=(steps, batch_size), p=prop))
    logits = torch.zeros(n, dtype=DT, requires_grad=True)
    log_z = torch.zeros((), dtype=DT, requires_grad=True)
    opt = torch.optim.Adam([{"params": [logits], "lr": lr}, {"params": [log_z], "lr": lr_logz}])
    for idx in all_idx:
        r = lpt[idx] - torch.log_softmax(logits, 0)[idx]
        obj, _ = batch_loss(r, spec, log_z if spec.learned_logz else None)
        opt.zero_grad()
        obj.backward()
        opt.step()
    with torch.no_grad():
        return float((torch.softmax(logits, 0) - p).abs().sum())


def t5_zero_iff_constant(loss: str) -> dict[str, float]:
    const = torch.full((32,), 1.234, dtype=DT)
    noisy = const + 0.1 * torch.randn(32, generator=torch.Generator().manual_seed(0), dtype=DT)
    spec = LOSSES[loss]
    lz = torch.tensor(1.234, dtype=DT)
    return {"value_constant": float(batch_loss(const, spec, lz)[1]),
            "value_nonconstant": float(batch_loss(noisy, spec, lz)[1])}


def t6_conventions() -> dict[str, str]:
    return {"alpha_paper=0": divergence_for_alpha_linex(alpha_linex_from_paper(0.0)),
            "alpha_paper=1": divergence_for_alpha_linex(alpha_linex_from_paper(1.0)),
            "alpha_paper=0.5": divergence_for_alpha_linex(alpha_linex_from_paper(0.5))}


# ---------------------------------------------------------------- the whole suite (pipeline stage)
TOL_T1 = 1e-10
TOL_T2 = 1e-12


def run_all(losses: list[str], n_batches: int, batch_size: int, offpolicy_steps: int, seed: int = 0) -> dict[str, Any]:
    divs = sorted({LOSSES[name].divergence for name in losses} | set(DIVERGENCES.names()))
    res: dict[str, Any] = {"divergences": {}, "losses": {}}
    for d in divs:
        div = DIVERGENCES[d]
        t1 = t1_population_identity(div)
        t2 = t2_wrong_centre(div)
        corr = correspondence_error(div)
        max_t1 = max(v for m in t1.values() for k, v in m.items() if k.startswith("rel_err"))
        min_scalar = min(v for m in t1.values() for k, v in m.items() if k.startswith("scalar"))
        if div.alpha_linex is not None:
            t2_pass = all(abs(1 - c) < TOL_T2 for c in t2.values())
        else:
            t2_pass = all(c < 1 - 1e-6 for c in t2.values())  # a wrong centre must break non-alpha f
        res["divergences"][d] = {"t1": t1, "t1_max_rel_err": max_t1, "t1_pass": max_t1 < TOL_T1 and min_scalar > 0,
                                 "t2_cosine": t2, "t2_pass": t2_pass, "correspondence": corr,
                                 "correspondence_pass": max(corr.values()) < 1e-9}
    for name in losses:
        spec = LOSSES[name]
        r: dict[str, Any] = {"divergence": spec.divergence, "centre": spec.centre}
        if not spec.learned_logz:
            r["t3_cosine"] = t3_batch_cosine(name, n_batches, batch_size, seed)
            r["t3_pass"] = r["t3_cosine"] >= 0.99
            r["t4"] = t4_translation(name)
            r["t4_pass"] = max(r["t4"].values()) < 1e-12
        r["t5_l1"] = {prop: t5_offpolicy(name, prop, steps=offpolicy_steps, seed=seed) for prop in ("uniform", "dirichlet")}
        r["t5_pass"] = max(r["t5_l1"].values()) < 1e-3
        r["t5_zero"] = t5_zero_iff_constant(name)
        r["t5_zero_pass"] = abs(r["t5_zero"]["value_constant"]) < 1e-12 and r["t5_zero"]["value_nonconstant"] > 1e-6
        res["losses"][name] = r
    t6 = t6_conventions()
    res["t6"] = t6
    res["t6_pass"] = t6 == {"alpha_paper=0": "forward_kl", "alpha_paper=1": "reverse_kl", "alpha_paper=0.5": "hellinger"}
    flags = [v for d in res["divergences"].values() for k, v in d.items() if k.endswith("_pass")]
    flags += [v for d in res["losses"].values() for k, v in d.items() if k.endswith("_pass")]
    res["all_pass"] = bool(all(flags) and res["t6_pass"])
    return res
