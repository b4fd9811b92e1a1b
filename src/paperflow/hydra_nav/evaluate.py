"""Per-episode metrics and the aggregate table: SR, SPL, SOT at each slow-call cost, slow calls per
episode, share of slow calls issued during stagnation, and the SOT-vs-cost curve.

SOT [recon, by analogy with SPL]: SOT = mean_n S_n · T*_n / max(T_n, T*_n), with T_n the episode's
operation time (move_cost per move + decision_cost per decision + C per slow call) and T*_n the
shortest path executed with no reasoning (move_cost·ℓ* + decision_cost·(ℓ* + 1), the +1 being stop)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.hydra_nav.irft import op_time

BASELINES = ("fast_only", "slow_every_step", "every_k", "heuristic")
EPISODE_KEYS = ("success", "moves", "decisions", "slow_calls", "stagnation_calls", "geodesic")


def baseline_triggers(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Policy name → trigger spec for the non-learned policies (a)–(d) the config asks for."""
    out: dict[str, dict[str, Any]] = {}
    pol = cfg["policies"]
    if pol["fast_only"]:
        out["fast_only"] = {"kind": "never"}
    if pol["slow_every_step"]:
        out["slow_every_step"] = {"kind": "always"}
    for k in pol["every_k"]:
        out[f"every_{int(k)}"] = {"kind": "every", "k": int(k)}
    if pol["heuristic"]:
        out["heuristic"] = {"kind": "stagnation", "m": int(cfg["controllers"]["stagnation_m"])}
    return out


def columns(records: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    return {k: np.array([r[k] for r in records], dtype=float) for k in EPISODE_KEYS}


def per_episode(cols: Mapping[str, np.ndarray], cost: float, *, move_cost: float, decision_cost: float
                ) -> dict[str, np.ndarray]:
    """Per-episode success, SPL term, SOT term, slow calls and stagnation calls at slow-call cost `cost`."""
    s, g, mv = cols["success"], cols["geodesic"], cols["moves"]
    spl = s * g / np.maximum(mv, g)
    t = op_time(mv, cols["decisions"], cols["slow_calls"], cost, move_cost=move_cost, decision_cost=decision_cost)
    t_ref = move_cost * g + decision_cost * (g + 1)
    sot = s * t_ref / np.maximum(t, t_ref)
    return {"success": s, "spl": spl, "sot": sot, "op_time": t, "slow_calls": cols["slow_calls"],
            "stagnation_calls": cols["stagnation_calls"]}


def stagnation_share(slow: np.ndarray, stag: np.ndarray) -> float:
    """Share of all slow calls issued during stagnation (NaN when there were none)."""
    tot = float(np.sum(slow))
    return float(np.sum(stag)) / tot if tot > 0 else float("nan")


def summarise(pe: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Means over (seeds ×) episodes of one policy at one cost."""
    return {"sr": float(np.mean(pe["success"])), "spl": float(np.mean(pe["spl"])), "sot": float(np.mean(pe["sot"])),
            "op_time": float(np.mean(pe["op_time"])), "calls_per_episode": float(np.mean(pe["slow_calls"])),
            "stagnation_share": stagnation_share(pe["slow_calls"], pe["stagnation_calls"])}
