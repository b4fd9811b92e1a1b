"""The learned trigger (e), trained by the spec's filtered rounds (iterative rejection fine-tuning of a
logistic trigger): roll out, keep successful episodes, keep the fastest share of those by operation time
at the slow-call cost C, fit p(trigger | features) to the kept steps' trigger labels (class-weighted),
roll out the next round by sampling from the fit."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.hydra_nav.agent import EpisodeResult, Logistic, RandomTrigger, Trigger, run_episode


def op_time(moves: np.ndarray, decisions: np.ndarray, calls: np.ndarray, cost: float, *, move_cost: float,
            decision_cost: float) -> np.ndarray:
    """Operation time T = move_cost·moves + decision_cost·decisions + cost·slow calls."""
    return move_cost * np.asarray(moves, float) + decision_cost * np.asarray(decisions, float) + \
        float(cost) * np.asarray(calls, float)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, iters: int = 30,
                 prior_correction: bool = True) -> Logistic:
    """Class-weighted L2 logistic regression by Newton's method on standardised features.
    Each present class gets total weight 1/2 (balanced); a single-class set is fitted with its own
    weights only, and the L2 term keeps the coefficients finite. Balanced weights fit the odds as if
    both classes were equally frequent; `prior_correction` adds log(π/(1−π)) (π: the kept steps' trigger
    rate) to the intercept, the standard prior-shift correction, so that sampling from the fit triggers
    at about the kept rate instead of about half the time [choice]."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    if x.ndim != 2 or len(x) != len(y) or len(x) == 0:
        raise ValueError("fit_logistic needs a non-empty (n, d) x and (n,) y")
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    sw = np.zeros(len(y))
    for c in (0.0, 1.0):
        m = y == c
        if m.any():
            sw[m] = 0.5 / m.sum()
    sw /= sw.sum()
    beta = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = l2 * 1e-3  # barely regularise the intercept
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -30, 30)))
        g = z.T @ (sw * (p - y)) + reg * beta
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg)
        step = np.linalg.solve(hess, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    b = float(beta[-1])
    pi = float(y.mean())
    if prior_correction and 0.0 < pi < 1.0:
        b += math.log(pi / (1.0 - pi))
    return Logistic(beta[:-1].copy(), b, mu, sd)


def keep_fastest(results: Sequence[EpisodeResult], cost: float, share: float, *, move_cost: float,
                 decision_cost: float) -> list[EpisodeResult]:
    """Rejection step: the successful episodes, then the fastest `share` of them (at least one) by T."""
    ok = [r for r in results if r.success]
    if not ok:
        return []
    t = op_time(np.array([r.moves for r in ok]), np.array([r.decisions for r in ok]),
                np.array([r.slow_calls for r in ok]), cost, move_cost=move_cost, decision_cost=decision_cost)
    n = max(1, int(math.ceil(share * len(ok))))
    order = np.argsort(t, kind="stable")[:n]
    return [ok[i] for i in order]


def rollouts(env: Any, indices: Sequence[int], trigger: Trigger, seed: int, tag: str, *, lam: float,
             stag_m: int) -> list[EpisodeResult]:
    return [run_episode(env, i, trigger, stream(seed, tag, i), lam=lam, stag_m=stag_m, keep_steps=True)
            for i in indices]


def round_stats(results: Sequence[EpisodeResult], kept: Sequence[EpisodeResult]) -> dict[str, Any]:
    n_steps = sum(len(r.labels) for r in kept)
    return {"episodes": len(results), "sr": float(np.mean([r.success for r in results])),
            "calls_per_episode": float(np.mean([r.slow_calls for r in results])),
            "kept_episodes": len(kept), "kept_steps": int(n_steps),
            "kept_trigger_rate": float(np.mean(np.concatenate([r.labels for r in kept]))) if n_steps else None}


def train_irft(env: Any, params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """All rounds for every slow-call cost; round 0 (random triggers) is shared by the costs.
    Round r rolls out on training episodes [r·n, (r+1)·n) of the env's episode file."""
    n = int(params["episodes_per_round"])
    rounds = int(params["rounds"])
    lam, stag_m = float(params["lam"]), int(params["stagnation_m"])
    mc, dc = float(params["move_cost"]), float(params["decision_cost"])
    n_eps = len(env.unwrapped.dataset["episodes"])
    if rounds * n > n_eps:
        raise ValueError(f"irft: {rounds} rounds × {n} episodes need {rounds * n} training episodes, the file has {n_eps}")
    first = rollouts(env, range(n), RandomTrigger(float(params["p0"])), seed, "round0", lam=lam, stag_m=stag_m)
    out: dict[str, Any] = {"seed": seed, "costs": {}}
    for cost in params["costs"]:
        results = first
        hist = []
        model: Logistic | None = None
        for r in range(rounds):
            kept = keep_fastest(results, float(cost), float(params["keep_share"]), move_cost=mc, decision_cost=dc)
            stats = round_stats(results, kept)
            if not kept or stats["kept_steps"] == 0:
                stats["note"] = "nothing kept: the previous trigger is kept"
                hist.append(stats)
                if model is None:
                    raise RuntimeError(f"irft cost {cost}: round {r} kept no step and there is no earlier fit")
            else:
                x = np.concatenate([k.feats for k in kept])
                y = np.concatenate([k.labels for k in kept]).astype(float)
                model = fit_logistic(x, y, l2=float(params["l2"]), prior_correction=bool(params["prior_correction"]))
                stats["model"] = model.to_dict()
                hist.append(stats)
            if r + 1 < rounds:
                idx = range((r + 1) * n, (r + 2) * n)
                results = rollouts(env, idx, model, seed, f"round{r + 1}_c{cost}", lam=lam, stag_m=stag_m)
        assert model is not None
        out["costs"][f"{float(cost):g}"] = {"rounds": hist, "model": model.to_dict()}
    return out
