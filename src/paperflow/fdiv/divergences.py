"""The f-divergence registry: each divergence with f and its surrogate g, g', g'' written out.

Correspondence (spec §2): with the log-ratio r = log p~ - log q and s = r - c (c a centre),
the surrogate L = E_pi[g(s)] has, on-policy and with c = log Z, the gradient of D_f(p||q) iff

    g'(s) = e^s f'(e^s) - f(e^s) + k,   i.e.   g''(s) = e^{2s} f''(e^s),

normalised by g(0) = g'(0) = 0. Every divergence below is one registry entry holding f and g, g', g''
written out independently, so the tests can check the correspondence instead of assuming it. The
entry also owns its facts: `alpha_linex` (member of the Amari/Linex family, and the scale to Linex)
and `mode` ("seeking" or "covering": the behaviour the claims compare).

Conventions (spec §8): `alpha_linex` (Hu et al., Amari/Minka with u = p/q): 0 = reverse KL,
1 = forward KL. This paper's alpha is `alpha_paper = 1 - alpha_linex`. Never a bare `alpha`.
The losses (divergence + centring rule) are in `paperflow.fdiv.losses`, one file per loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from paperflow.core.registry import Registry

Fn = Callable[[Tensor], Tensor]

# Gauss-Legendre nodes on [0, 1] for g_JS(s) = s * int_0^1 g'(s t) dt (smooth integrand)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(48)
_GL_X = (_GL_X + 1.0) / 2.0
_GL_W = _GL_W / 2.0


@dataclass(frozen=True)
class FDivergence:
    """D_f(p||q) = E_q[f(p/q)] and its surrogate g (normalised g(0) = g'(0) = 0)."""

    name: str
    f: Fn  # f(u), u = p/q > 0, convex, f(1) = 0
    g: Fn  # g(s)
    gprime: Fn  # g'(s)
    gsecond: Fn  # g''(s) = e^{2s} f''(e^s)
    alpha_linex: float | None = None  # member of the Amari/Linex family (g = scale * g_linex(alpha))
    scale: float = 1.0
    description: str = ""
    mode: str = ""  # "seeking" (alpha_linex <= 0: reverse KL, Neyman chi^2) or "covering" (alpha_linex >= 0.5, JS)


DIVERGENCES: Registry[FDivergence] = Registry("f-divergence")


def _reg(d: FDivergence) -> FDivergence:
    DIVERGENCES.register(d.name)(d)
    return d


def linex_g(alpha: float) -> tuple[Fn, Fn, Fn]:
    """g, g', g'' of Linex(alpha): g = (e^{a s} - a s - 1)/a^2 (limit s^2/2 at a = 0)."""
    if alpha == 0:
        return (lambda s: 0.5 * s**2, lambda s: s, lambda s: torch.ones_like(s))
    a = alpha
    return (lambda s: (torch.expm1(a * s) - a * s) / a**2,
            lambda s: torch.expm1(a * s) / a,
            lambda s: torch.exp(a * s))


def amari_f(alpha: float) -> Fn:
    """Amari alpha f with u = p/q; 0 and 1 are the reverse- and forward-KL limits."""
    if alpha == 0:
        return lambda u: -torch.log(u)
    if alpha == 1:
        return lambda u: u * torch.log(u)
    a = alpha
    return lambda u: (u**a - a * u - (1 - a)) / (a * (a - 1))


def amari(alpha_linex: float, name: str | None = None) -> FDivergence:
    """The Amari alpha divergence as an FDivergence (any real alpha_linex)."""
    g, gp, g2 = linex_g(alpha_linex)
    mode = "seeking" if alpha_linex <= 0 else ("covering" if alpha_linex >= 0.5 else "")
    return FDivergence(name or f"amari_{alpha_linex:g}", amari_f(alpha_linex), g, gp, g2, alpha_linex, 1.0,
                       f"Amari alpha_linex={alpha_linex:g}", mode)


def _js_gprime(s: Tensor) -> Tensor:
    return 0.5 * (torch.nn.functional.softplus(s) - math.log(2.0))


def _js_g(s: Tensor) -> Tensor:
    """g_JS(s) = 1/2 int_0^s log((1 + e^t)/2) dt by 48-point Gauss-Legendre (differentiable)."""
    x = torch.as_tensor(_GL_X, dtype=s.dtype, device=s.device)
    w = torch.as_tensor(_GL_W, dtype=s.dtype, device=s.device)
    return s * (_js_gprime(s.unsqueeze(-1) * x) * w).sum(-1)


def _js_f(u: Tensor) -> Tensor:
    return 0.5 * (u * torch.log(2 * u / (1 + u)) + torch.log(2 / (1 + u)))


_reg(FDivergence("reverse_kl", amari_f(0.0), *linex_g(0.0), alpha_linex=0.0, scale=1.0,
                 description="KL(q||p); g = s^2/2 (TB / VarGrad / log-variance)", mode="seeking"))
_reg(FDivergence("forward_kl", amari_f(1.0), *linex_g(1.0), alpha_linex=1.0, scale=1.0,
                 description="KL(p||q); g = e^s - s - 1", mode="covering"))
_reg(FDivergence("hellinger", lambda u: (torch.sqrt(u) - 1) ** 2,
                 lambda s: 2 * (torch.expm1(s / 2) - s / 2), lambda s: torch.expm1(s / 2),
                 lambda s: 0.5 * torch.exp(s / 2), alpha_linex=0.5, scale=0.5,
                 description="squared Hellinger; g = 2(e^{s/2} - s/2 - 1)", mode="covering"))
_reg(FDivergence("pearson_chi2", lambda u: (u - 1) ** 2,
                 lambda s: 0.5 * (torch.expm1(2 * s) - 2 * s), lambda s: torch.expm1(2 * s),
                 lambda s: 2 * torch.exp(2 * s), alpha_linex=2.0, scale=2.0,
                 description="chi^2(p||q); g = (e^{2s} - 2s - 1)/2", mode="covering"))
_reg(FDivergence("neyman_chi2", lambda u: (1 - u) ** 2 / u,
                 lambda s: 2 * (torch.expm1(-s) + s), lambda s: -2 * torch.expm1(-s),
                 lambda s: 2 * torch.exp(-s), alpha_linex=-1.0, scale=2.0,
                 description="chi^2(q||p); g = 2(e^{-s} + s - 1)", mode="seeking"))
_reg(FDivergence("js", _js_f, _js_g, _js_gprime, lambda s: 0.5 * torch.sigmoid(s), alpha_linex=None,
                 description="Jensen-Shannon; g' = log((1 + e^s)/2)/2 (g by quadrature)", mode="covering"))


def alpha_linex_from_paper(alpha_paper: float) -> float:
    """The paper's alpha (Fig. 1: 1 = reverse KL, 0 = forward KL) in the Linex convention."""
    return 1.0 - alpha_paper


def divergence_for_alpha_linex(alpha_linex: float) -> str:
    """Name of the registered divergence whose surrogate is (a multiple of) Linex(alpha_linex)."""
    for name in DIVERGENCES:
        if DIVERGENCES[name].alpha_linex == alpha_linex:
            return name
    raise KeyError(f"no registered divergence with alpha_linex={alpha_linex}")
