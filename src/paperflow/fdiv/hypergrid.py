"""E2 (spec §6.2): hypergrid GFlowNet trained with f-TB losses on- and off-policy.

Environment (Bengio et al. 2021): states x in {0..H-1}^D from the origin; actions increment one
coordinate (masked at H-1) or stop. Reward R0 + R1 prod 1[0.25 < a_d] + R2 prod 1[0.3 < a_d < 0.4],
a_d = |x_d/(H-1) - 0.5|, evaluated in exact integer arithmetic (no float boundary cases).

Model: P_F is an MLP on the one-hot state giving D+1 masked logits; P_B is uniform over parents.
Since the state space is enumerable, P_F is evaluated on all states once per step (one batched
forward); trajectories index into that table, so log P_F(tau) stays differentiable.

Per trajectory r(tau) = log R(x) + log P_B(tau|x) - log P_F(tau); the f-TB batch losses of
`losses.py` need no log Z (the `learned` baselines carry one).

Behaviours: `onpolicy`, `eps` (epsilon-uniform over valid actions), `lagL` (the policy of step t-L, as
asynchronous actors would use), `uniform` (random valid actions).
The exact terminal distribution q(x) is computed by dynamic programming over the DAG.
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from paperflow.fdiv.losses import LOSSES, batch_loss


class HyperGrid:
    def __init__(self, height: int, ndim: int, r0: float, r1: float, r2: float):
        self.H, self.D = height, ndim
        self.n = height**ndim
        self.coords = np.array(np.unravel_index(np.arange(self.n), (height,) * ndim)).T  # (n, D)
        h1 = height - 1
        dev = np.abs(2 * self.coords - h1)  # a_d = dev / (2 (H-1))
        outer = np.all(2 * dev > h1, axis=1)  # a_d > 0.25
        ring = np.all((10 * dev > 6 * h1) & (10 * dev < 8 * h1), axis=1)  # 0.3 < a_d < 0.4
        self.reward = r0 + r1 * outer + r2 * ring
        self.log_reward = np.log(self.reward)
        self.p = self.reward / self.reward.sum()
        self.modes = np.flatnonzero(ring)
        self.onehot = np.zeros((self.n, ndim * height))
        for d in range(ndim):
            self.onehot[np.arange(self.n), d * height + self.coords[:, d]] = 1.0
        # action a < D increments coordinate a; action D stops
        self.mask = np.ones((self.n, ndim + 1), dtype=bool)
        self.child = np.full((self.n, ndim), -1)
        strides = np.array([height ** (ndim - 1 - d) for d in range(ndim)])
        for d in range(ndim):
            ok = self.coords[:, d] < h1
            self.mask[:, d] = ok
            self.child[ok, d] = np.arange(self.n)[ok] + strides[d]
        self.n_parents = (self.coords > 0).sum(1)
        self.level = self.coords.sum(1)
        self.max_len = ndim * h1 + 1

    def terminal_distribution(self, log_pf: np.ndarray) -> np.ndarray:
        """Exact q(x) = reach(x) P_F(stop|x); reach by DP in topological (level) order."""
        pf = np.exp(log_pf)
        reach = np.zeros(self.n)
        reach[0] = 1.0
        for s in np.argsort(self.level, kind="stable"):
            for d in range(self.D):
                c = self.child[s, d]
                if c >= 0:
                    reach[c] += reach[s] * pf[s, d]
        return reach * pf[:, self.D]


class PolicyMLP(nn.Module):
    def __init__(self, env: HyperGrid, hidden: int, layers: int):
        super().__init__()
        dims = [env.D * env.H] + [hidden] * layers
        mods: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            mods += [nn.Linear(a, b), nn.LeakyReLU()]
        mods.append(nn.Linear(dims[-1], env.D + 1))
        self.net = nn.Sequential(*mods)
        self.register_buffer("x", torch.tensor(env.onehot, dtype=torch.float32))
        self.register_buffer("mask", torch.tensor(env.mask))

    def log_pf_table(self) -> Tensor:
        logits = self.net(self.x).double().masked_fill(~self.mask, -math.inf)
        return torch.log_softmax(logits, dim=1)


def sample_trajectories(env: HyperGrid, probs: np.ndarray, n: int, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Roll out n trajectories with the action probabilities `probs` (n_states x D+1).

    Returns (traj id, state, action) of every transition and the terminal states.
    """
    state = np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    tid, st, ac = [], [], []
    cum = np.cumsum(probs, axis=1)
    for _ in range(env.max_len):
        idx = np.flatnonzero(alive)
        if len(idx) == 0:
            break
        s = state[idx]
        u = rng.random(len(idx))[:, None]
        a = np.minimum((u > cum[s]).sum(1), env.D)
        a = np.where(env.mask[s, a], a, env.D)  # numerical guard: never take a masked action
        tid.append(idx)
        st.append(s)
        ac.append(a)
        move = a < env.D
        state[idx[move]] = env.child[s[move], a[move]]
        alive[idx[~move]] = False
    return np.concatenate(tid), np.concatenate(st), np.concatenate(ac), state


def parse_behaviour(b: str) -> tuple[str, int]:
    m = re.fullmatch(r"lag(\d+)", b)
    if m:
        return "lag", int(m.group(1))
    if b in ("onpolicy", "eps", "uniform"):
        return b, 0
    raise ValueError(f"unknown hypergrid behaviour '{b}' (onpolicy, eps, lagN, uniform)")


def metrics(env: HyperGrid, q: np.ndarray) -> dict[str, float]:
    p = env.p
    pos = q > 0
    with np.errstate(divide="ignore"):
        logq = np.log(q)
    return {"l1": float(np.abs(q - p).sum()),
            "kl_pq": float((p * (np.log(p) - logq)).sum()),  # inf when q underflows to 0 somewhere
            "kl_qp": float((q[pos] * (logq[pos] - np.log(p[pos]))).sum()),
            "modes_captured": int((q[env.modes] >= 0.5 * p[env.modes]).sum())}


def train_one(p: dict[str, Any], behaviour: str, seed: int) -> dict[str, Any]:
    kind, lag = parse_behaviour(behaviour)
    env = HyperGrid(p["height"], p["ndim"], p["r0"], p["r1"], p["r2"])
    torch.manual_seed(seed)
    model = PolicyMLP(env, p["hidden"], p["layers"])
    rng = np.random.default_rng([seed, 23])
    spec = LOSSES[p["loss"]]
    log_z = torch.zeros((), dtype=torch.float64, requires_grad=True)
    groups = [{"params": list(model.parameters()), "lr": p["lr"]}]
    if spec.learned_logz:
        groups.append({"params": [log_z], "lr": p["lr_logz"]})
    opt = torch.optim.Adam(groups)
    log_r = torch.tensor(env.log_reward)
    neg_log_npar = torch.tensor(-np.log(np.maximum(env.n_parents, 1)), dtype=torch.float64)
    uniform = env.mask / env.mask.sum(1, keepdims=True)
    history: deque[np.ndarray] = deque(maxlen=lag + 1)
    discovered: set[int] = set()
    curve: list[dict[str, Any]] = []
    all_captured_step = None
    B = p["batch_size"]
    for step in range(p["steps"] + 1):
        table = model.log_pf_table()
        cur = np.exp(table.detach().numpy())
        if step % p["eval_every"] == 0 or step == p["steps"]:
            m = metrics(env, env.terminal_distribution(table.detach().numpy()))
            curve.append({"step": step, **m, "modes_discovered": len(discovered)})
            if all_captured_step is None and m["modes_captured"] == len(env.modes):
                all_captured_step = step
        if step == p["steps"]:
            break
        history.append(cur)
        if kind == "onpolicy":
            probs = cur
        elif kind == "eps":
            probs = (1 - p["eps"]) * cur + p["eps"] * uniform
        elif kind == "lag":
            probs = history[0]  # the policy of step t - lag (step 0's early on)
        else:
            probs = uniform
        tid, st, ac, term = sample_trajectories(env, probs, B, rng)
        discovered.update(int(x) for x in term if x in set(env.modes))
        tid_t = torch.as_tensor(tid)
        log_pf = torch.zeros(B, dtype=torch.float64).index_add(0, tid_t, table[torch.as_tensor(st), torch.as_tensor(ac)])
        moved = ac < env.D
        child = env.child[st[moved], ac[moved]]
        log_pb = torch.zeros(B, dtype=torch.float64).index_add(0, torch.as_tensor(tid[moved]), neg_log_npar[child])
        r = log_r[term] + log_pb - log_pf
        obj, _ = batch_loss(r, spec, log_z if spec.learned_logz else None)
        opt.zero_grad()
        obj.backward()
        opt.step()
    q = env.terminal_distribution(model.log_pf_table().detach().numpy())
    out = metrics(env, q)
    out.update({"modes_discovered": len(discovered), "n_modes": int(len(env.modes)),
                "all_modes_captured_step": all_captured_step, "curve": curve, "q": q.tolist(),
                "log_z_learned": float(log_z.detach()) if spec.learned_logz else None,
                "true_log_z": float(np.log(env.reward.sum()))})
    return out


def run(p: dict[str, Any]) -> dict[str, Any]:
    from paperflow.core.progress import progress

    out: dict[str, Any] = {"loss": p["loss"], "seed": p["seed"], "behaviours": {}}
    for b in progress(p["behaviours"], desc=f"hypergrid {p['loss']}"):
        out["behaviours"][b] = train_one(p, b, p["seed"])
    return out
