"""E1 (spec §6.1): a 2-D Gaussian-mixture target fitted by variational models with f-TB losses.

Target: K modes on a circle (radius, sigma), equal or unequal weights, with a known log-normaliser;
the losses only see log p~ = log p + `log_z_offset`, so the offset tests translation invariance.

Models (one readable class each):
- `gaussian`: one full-covariance Gaussian (misspecified; shows mode seeking vs covering);
- `tabular`: softmax over a G x G grid on [-E, E]^2 (exact-capable reference; metrics exact);
- `flow`: RealNVP, affine couplings with alternating masks, tanh-bounded log-scales, identity init.

Behaviour policies: `onpolicy` (current model), `proposal` (fixed N(0, s^2 I)), `stale` (samples drawn by the
model `stale_lag` steps earlier), `mix` (half on-policy, half proposal). Samples never carry gradient;
log q of a sample is re-evaluated under the current parameters.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from paperflow.core.registry import Registry
from paperflow.fdiv.losses import LOSSES, batch_loss

UNEQUAL_WEIGHTS = [0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05]


# ------------------------------------------------------------------------------------------ target
class MixtureTarget:
    def __init__(self, n_modes: int, radius: float, sigma: float, weights: str, log_z_offset: float):
        ang = 2 * math.pi * np.arange(n_modes) / n_modes
        self.means = torch.tensor(np.stack([radius * np.cos(ang), radius * np.sin(ang)], 1))
        if weights == "equal":
            w = np.full(n_modes, 1.0 / n_modes)
        else:
            if n_modes != len(UNEQUAL_WEIGHTS):
                raise ValueError(f"unequal weights are defined for {len(UNEQUAL_WEIGHTS)} modes")
            w = np.asarray(UNEQUAL_WEIGHTS)
        self.weights = torch.tensor(w / w.sum())
        self.sigma = sigma
        self.log_z_offset = log_z_offset

    def log_prob(self, x: Tensor) -> Tensor:
        """Normalised log density."""
        d2 = ((x[:, None, :] - self.means.to(x.dtype)[None]) ** 2).sum(-1)
        comp = -0.5 * d2 / self.sigma**2 - math.log(2 * math.pi * self.sigma**2)
        return torch.logsumexp(comp + torch.log(self.weights.to(x.dtype))[None], dim=1)

    def log_unnorm(self, x: Tensor) -> Tensor:
        return self.log_prob(x) + self.log_z_offset

    def sample(self, n: int, rng: np.random.Generator) -> Tensor:
        k = rng.choice(len(self.weights), size=n, p=self.weights.numpy())
        return self.means[k] + self.sigma * torch.as_tensor(rng.standard_normal((n, 2)))

    def mode_of(self, x: Tensor) -> Tensor:
        """Voronoi cell (nearest mode centre) of each point."""
        return torch.cdist(x.to(self.means.dtype), self.means).argmin(1)


# ------------------------------------------------------------------------------------------ models
MODELS: Registry[type] = Registry("gmm model")


@MODELS.register("gaussian")
class GaussianModel(nn.Module):
    """q = N(mu, L L^T) with L lower-triangular (log-diagonal parametrised)."""

    def __init__(self, grid: int, extent: float, gen: torch.Generator, **_: Any):
        super().__init__()
        self.mu = nn.Parameter(0.5 * torch.randn(2, generator=gen, dtype=torch.float64))
        self.log_diag = nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.off = nn.Parameter(torch.zeros(1, dtype=torch.float64))

    def _chol(self) -> tuple[Tensor, Tensor, Tensor]:
        d = torch.exp(self.log_diag)
        return d[0], d[1], self.off[0]

    def log_prob(self, x: Tensor) -> Tensor:
        l00, l11, l10 = self._chol()
        z0 = (x[:, 0] - self.mu[0]) / l00
        z1 = (x[:, 1] - self.mu[1] - l10 * z0) / l11
        return -0.5 * (z0**2 + z1**2) - self.log_diag.sum() - math.log(2 * math.pi)

    def rsample(self, n: int, gen: torch.Generator) -> Tensor:
        l00, l11, l10 = self._chol()
        e = torch.randn(n, 2, generator=gen, dtype=torch.float64)
        return torch.stack([self.mu[0] + l00 * e[:, 0], self.mu[1] + l10 * e[:, 0] + l11 * e[:, 1]], 1)

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator) -> Tensor:
        return self.rsample(n, gen)


class _Coupling(nn.Module):
    def __init__(self, mask: Tensor, hidden: int):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 4))
        nn.init.zeros_(self.net[-1].weight)  # identity-like initialisation
        nn.init.zeros_(self.net[-1].bias)
        self.scale_bound = 2.0

    def _st(self, xm: Tensor) -> tuple[Tensor, Tensor]:
        s, t = self.net(xm).chunk(2, dim=-1)
        s = self.scale_bound * torch.tanh(s / self.scale_bound)
        return s * (1 - self.mask), t * (1 - self.mask)

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:  # base -> data
        s, t = self._st(z * self.mask)
        return z * self.mask + (1 - self.mask) * (z * torch.exp(s) + t), s.sum(-1)

    def inverse(self, x: Tensor) -> tuple[Tensor, Tensor]:  # data -> base
        s, t = self._st(x * self.mask)
        return x * self.mask + (1 - self.mask) * ((x - t) * torch.exp(-s)), -s.sum(-1)


@MODELS.register("flow")
class FlowModel(nn.Module):
    """RealNVP: `n_couplings` affine couplings (alternating masks), base N(0, base_std^2 I)."""

    def __init__(self, grid: int, extent: float, gen: torch.Generator, n_couplings: int = 6, hidden: int = 64,
                 base_std: float = 3.0, **_: Any):
        super().__init__()
        state = torch.random.get_rng_state()
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0]) for i in range(n_couplings)]
        self.layers = nn.ModuleList([_Coupling(m, hidden) for m in masks])
        torch.random.set_rng_state(state)
        self.base_std = base_std
        self.double()

    def log_prob(self, x: Tensor) -> Tensor:
        logdet = torch.zeros(x.shape[0], dtype=x.dtype)
        for layer in reversed(self.layers):
            x, ld = layer.inverse(x)
            logdet = logdet + ld
        base = -0.5 * (x / self.base_std).pow(2).sum(-1) - 2 * math.log(self.base_std) - math.log(2 * math.pi)
        return base + logdet

    def rsample(self, n: int, gen: torch.Generator) -> Tensor:
        z = self.base_std * torch.randn(n, 2, generator=gen, dtype=torch.float64)
        for layer in self.layers:
            z, _ = layer(z)
        return z

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator) -> Tensor:
        return self.rsample(n, gen)


@MODELS.register("tabular")
class TabularModel(nn.Module):
    """Softmax over the cells of a grid x grid lattice on [-extent, extent]^2 (samples = cell indices)."""

    discrete = True

    def __init__(self, grid: int, extent: float, gen: torch.Generator, **_: Any):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(grid * grid, dtype=torch.float64))

    def log_prob(self, idx: Tensor) -> Tensor:
        return torch.log_softmax(self.logits, 0)[idx]

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator) -> Tensor:
        return torch.multinomial(torch.softmax(self.logits, 0), n, replacement=True, generator=gen)


def grid_centres(grid: int, extent: float) -> Tensor:
    c = torch.linspace(-extent, extent, grid + 1, dtype=torch.float64)
    c = 0.5 * (c[1:] + c[:-1])
    xx, yy = torch.meshgrid(c, c, indexing="xy")
    return torch.stack([xx.reshape(-1), yy.reshape(-1)], 1)


# ------------------------------------------------------------------------------------------ training
class Problem:
    """Target + model + behaviour, in the model's sample space (points, or grid-cell indices)."""

    def __init__(self, p: dict[str, Any]):
        self.p = p
        self.target = MixtureTarget(p["n_modes"], p["radius"], p["sigma"], p["weights"], p["log_z_offset"])
        self.centres = grid_centres(p["grid"], p["extent"])
        self.discrete = p["model"] == "tabular"
        cell_area = (2 * p["extent"] / p["grid"]) ** 2
        # discretised target/proposal on the grid (tabular model): mass = density(centre) * area
        self.grid_logp_tilde = self.target.log_unnorm(self.centres) + math.log(cell_area)
        self.grid_p = torch.softmax(self.grid_logp_tilde, 0)
        s = p["proposal_std"]
        lp = -0.5 * (self.centres / s).pow(2).sum(1)
        self.grid_proposal = torch.softmax(lp, 0)

    def log_target(self, x: Tensor) -> Tensor:
        return self.grid_logp_tilde[x] if self.discrete else self.target.log_unnorm(x)

    def proposal_sample(self, n: int, gen: torch.Generator) -> Tensor:
        if self.discrete:
            return torch.multinomial(self.grid_proposal, n, replacement=True, generator=gen)
        return self.p["proposal_std"] * torch.randn(n, 2, generator=gen, dtype=torch.float64)


@torch.no_grad()
def evaluate(prob: Problem, model: nn.Module, n: int, gen: torch.Generator, rng: np.random.Generator) -> dict[str, float]:
    t = prob.target
    w = t.weights
    if prob.discrete:
        q = torch.softmax(model.logits, 0)
        modes = t.mode_of(prob.centres)
        qj = torch.zeros(len(w), dtype=q.dtype).index_add_(0, modes, q)
        p = prob.grid_p
        logq, logp = torch.log(q), torch.log(p)
        out = {"l1_grid": float((q - p).abs().sum()),
               "kl_pq": float((p * (logp - logq)).sum()),
               "kl_qp": float((q * (logq - logp)).sum()),
               "hellinger": float(((q.sqrt() - p.sqrt()) ** 2).sum())}
    else:
        xq = model.sample(n, gen)
        qj = torch.bincount(t.mode_of(xq), minlength=len(w)).double() / n
        lq, lp = model.log_prob(xq), t.log_prob(xq)
        xp = t.sample(n, rng)
        logu = lp - lq
        out = {"kl_qp": float((lq - lp).mean()),
               "kl_pq": float((t.log_prob(xp) - model.log_prob(xp)).mean()),
               "hellinger": float(((torch.exp(0.5 * logu) - 1) ** 2).mean())}
    out["coverage"] = int((qj >= 0.25 * w).sum())
    out["mode_weight_l1"] = float((qj - w).abs().sum())
    out["mode_mass"] = [float(v) for v in qj]
    return out


@torch.no_grad()
def density_on_grid(prob: Problem, model: nn.Module) -> np.ndarray:
    """q on the grid cells (probability mass per cell), for the density figures."""
    if prob.discrete:
        q = torch.softmax(model.logits, 0)
    else:
        cell_area = (2 * prob.p["extent"] / prob.p["grid"]) ** 2
        q = torch.exp(model.log_prob(prob.centres)) * cell_area
    g = prob.p["grid"]
    return q.reshape(g, g).numpy()


def train_one(p: dict[str, Any], behaviour: str, seed: int) -> tuple[dict[str, Any], np.ndarray]:
    """Train one model with one loss from one behaviour policy; return (metrics, final grid density)."""
    torch.manual_seed(seed)
    prob = Problem(p)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng([seed, 17])
    model = MODELS[p["model"]](p["grid"], p["extent"], gen, **p.get("flow", {}))
    spec = LOSSES[p["loss"]]
    log_z = torch.zeros((), dtype=torch.float64, requires_grad=True)
    groups = [{"params": list(model.parameters()), "lr": p["lr"]}]
    if spec.learned_logz:
        groups.append({"params": [log_z], "lr": p["lr_logz"]})
    opt = torch.optim.Adam(groups)
    B, lag = p["batch_size"], p["stale_lag"]
    buffer: deque[Tensor] = deque()
    curve: list[dict[str, Any]] = []
    grad_norms: list[float] = []
    n_nonfinite = 0
    eval_gen = torch.Generator().manual_seed(seed + 10_000)
    eval_rng = np.random.default_rng([seed, 99])
    for step in range(p["steps"] + 1):
        if step % p["eval_every"] == 0 or step == p["steps"]:
            ev = evaluate(prob, model, p["n_curve_samples"], eval_gen, eval_rng)
            ev.pop("mode_mass")
            curve.append({"step": step, **ev})
        if step == p["steps"]:
            break
        if behaviour == "onpolicy":
            x = model.sample(B, gen)
        elif behaviour == "proposal":
            x = prob.proposal_sample(B, gen)
        elif behaviour == "mix":
            x = torch.cat([model.sample(B // 2, gen), prob.proposal_sample(B - B // 2, gen)])
        elif behaviour == "stale":
            buffer.append(model.sample(B, gen))
            x = buffer.popleft() if len(buffer) > lag else buffer[0]
        elif behaviour == "reparam":  # reparameterised reverse-KL VI baseline (continuous models, on-policy)
            x = None
        else:
            raise ValueError(f"unknown behaviour '{behaviour}'")
        if x is None:
            xs = model.rsample(B, gen)
            obj = (model.log_prob(xs) - prob.log_target(xs)).mean()
        else:
            r = prob.log_target(x) - model.log_prob(x)
            obj, _ = batch_loss(r, spec, log_z if spec.learned_logz else None)
        opt.zero_grad()
        obj.backward()
        gn = torch.sqrt(sum((q.grad**2).sum() for q in model.parameters() if q.grad is not None))
        if not torch.isfinite(gn):
            n_nonfinite += 1
            opt.zero_grad()
            continue
        grad_norms.append(float(gn))
        opt.step()
    final = evaluate(prob, model, p["n_eval_samples"], eval_gen, eval_rng)
    g = np.asarray(grad_norms)
    half = g[len(g) // 2:] if len(g) else np.zeros(1)
    final.update({"grad_norm_mean": float(half.mean()), "grad_norm_var": float(half.var()),
                  "nonfinite_steps": n_nonfinite, "log_z_learned": float(log_z.detach()) if spec.learned_logz else None,
                  "curve": curve})
    return final, density_on_grid(prob, model)


def run(p: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """All behaviours of one (model, loss, seed) job."""
    from paperflow.core.progress import progress

    out: dict[str, Any] = {"model": p["model"], "loss": p["loss"], "seed": p["seed"], "behaviours": {}}
    dens: dict[str, np.ndarray] = {}
    for b in progress(p["behaviours"], desc=f"gmm {p['model']}/{p['loss']}"):
        m, d = train_one(p, b, p["seed"])
        out["behaviours"][b] = m
        dens[b] = d
    return out, dens
