"""The f-TB loss registry: a loss = a registered divergence + a centring rule; one file per loss.

Each module of this package (`rkl.py`, `js.py`, ...) registers exactly one loss named after the file,
so the config schema's list of valid losses is this package's file list (`x-enum-modules`) and a new
loss is one file plus one config entry. Importing the package imports every loss module.

Centring rules (spec §4), each one function in `CENTRES`:
- `profiled` (alpha family only): L = min_c mean g(r_i - c), closed form via logsumexp.
- `logz_estimate` (any f): c = stopgrad(logsumexp(r) - log B), gradient form mean(sg(g'(r - c)) r).
- `profiled_numeric` (any f): c* = argmin_c mean g(r_i - c) by bisection; exact alpha-family profiling
  generalised, but for non-alpha f on-policy it follows a different divergence (spec §4.2).
- `learned`: c is a learned scalar log Z trained jointly (TB / Hu et al. baselines).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from paperflow.core.registry import Registry
from paperflow.fdiv.divergences import (  # noqa: F401  (re-exported: the registry's public surface)
    DIVERGENCES,
    FDivergence,
    Fn,
    alpha_linex_from_paper,
    amari,
    amari_f,
    divergence_for_alpha_linex,
    linex_g,
)


@dataclass(frozen=True)
class LossSpec:
    """One loss: which divergence it follows, how it centres, and what that implies."""

    name: str
    divergence: str
    centre: str  # a key of CENTRES
    description: str = ""

    @property
    def div(self) -> FDivergence:
        return DIVERGENCES[self.divergence]

    @property
    def learned_logz(self) -> bool:
        """Carries a learned log Z (a TB-style baseline, not a translation-invariant f-TB loss)."""
        return self.centre == "learned"

    @property
    def alpha_linex(self) -> float | None:
        return self.div.alpha_linex

    @property
    def mode(self) -> str:
        """"seeking" / "covering" / "" — the divergence's behaviour (what the mode claims compare)."""
        return self.div.mode


LOSSES: Registry[LossSpec] = Registry("loss")


def define(module: str, *, divergence: str, centre: str, description: str | None) -> LossSpec:
    """Register the loss of one module of this package, named after the module's file."""
    name = module.rsplit(".", 1)[-1]
    if centre not in CENTRES:
        raise ValueError(f"loss {name}: unknown centre '{centre}'; known: {', '.join(sorted(CENTRES))}")
    if centre == "profiled" and DIVERGENCES[divergence].alpha_linex is None:
        raise ValueError(f"loss {name}: the profiled centre is only exact for the alpha family")
    spec = LossSpec(name, divergence, centre, " ".join((description or "").split()))
    LOSSES.register(name)(spec)
    return spec


# ------------------------------------------------------------------------------------ centring rules
def profiled_alpha_loss(r: Tensor, alpha_linex: float) -> Tensor:
    """min_c mean_i g_linex(r_i - c) in closed form (translation invariant; logsumexp-stable)."""
    if alpha_linex == 0:
        return 0.5 * ((r - r.mean()) ** 2).mean()
    a = alpha_linex
    lse = torch.logsumexp(a * r, dim=0) - math.log(r.shape[0])
    return (lse - a * r.mean()) / a**2


def logz_estimate(r: Tensor) -> Tensor:
    """Batch estimate of log Z on-policy: log mean exp(r) (no gradient)."""
    return (torch.logsumexp(r.detach(), dim=0) - math.log(r.shape[0]))


@torch.no_grad()
def profiled_centre(r: Tensor, gprime: Fn, iters: int = 100) -> Tensor:
    """c* with mean g'(r - c*) = 0 (g' increasing, g'(0) = 0 so c* lies in [min r, max r]); bisection."""
    lo, hi = r.min().clone(), r.max().clone()
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if gprime(r - mid).mean() > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * (1 + abs(float(mid))):
            break
    return 0.5 * (lo + hi)


def _profiled(r: Tensor, div: FDivergence, log_z: Tensor | None) -> tuple[Tensor, Tensor]:
    obj = div.scale * profiled_alpha_loss(r, div.alpha_linex)  # type: ignore[arg-type]
    return obj, obj.detach()


def _gradient_form(r: Tensor, div: FDivergence, c: Tensor) -> tuple[Tensor, Tensor]:
    """mean(sg(g'(r - c)) r): the gradient of mean g(r - c) with c held fixed; value logged from g."""
    s = r.detach() - c
    obj = (div.gprime(s).detach() * r).mean()
    return obj, div.g(s).mean().detach()


def _logz_estimate(r: Tensor, div: FDivergence, log_z: Tensor | None) -> tuple[Tensor, Tensor]:
    return _gradient_form(r, div, logz_estimate(r))


def _profiled_numeric(r: Tensor, div: FDivergence, log_z: Tensor | None) -> tuple[Tensor, Tensor]:
    # envelope theorem: the optimal centre c* carries no gradient
    return _gradient_form(r, div, profiled_centre(r.detach(), div.gprime))


def _learned(r: Tensor, div: FDivergence, log_z: Tensor | None) -> tuple[Tensor, Tensor]:
    if log_z is None:
        raise ValueError("a learned centre needs a learned log Z")
    obj = div.g(r - log_z).mean()
    return obj, obj.detach()


Centre = Callable[[Tensor, FDivergence, "Tensor | None"], "tuple[Tensor, Tensor]"]
CENTRES: dict[str, Centre] = {"profiled": _profiled, "logz_estimate": _logz_estimate,
                              "profiled_numeric": _profiled_numeric, "learned": _learned}


def batch_loss(r: Tensor, loss: LossSpec | str, log_z: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(objective to differentiate, loss value to log) for a batch of log-ratios r (1-D).

    r must be differentiable through the model only (samples are constants). For the `learned`
    centre, `log_z` is the learned scalar and receives gradient too.
    """
    spec = LOSSES[loss] if isinstance(loss, str) else loss
    if spec.learned_logz and log_z is None:
        raise ValueError(f"loss {spec.name} needs a learned log Z")
    return CENTRES[spec.centre](r, spec.div, log_z)


def names() -> list[str]:
    return LOSSES.names()


for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")
