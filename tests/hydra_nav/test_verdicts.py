"""Every claim of the hydra_nav summary on synthetic metrics: held, did not hold, not testable."""

import functools

import numpy as np
import pytest

from paperflow.core.config import load_config
from paperflow.hydra_nav import report

POLICIES = ("fast_only", "slow_every_step", "every_5", "every_10", "heuristic", "irft")


@functools.cache
def _claims():
    return load_config("config/config.yaml")["hydra_nav"]["claims"]


def ccfg():
    cfg = _claims()
    return {**cfg, "bootstrap": {"n_boot": 200, "seed": 0}}


def metrics(houses=200, seeds=3, sr=None, sot=None, calls=None, stag=None):
    """Per-episode arrays with the given per-policy means (deterministic spread around them)."""
    sr, sot = dict(sr or {}), dict(sot or {})
    calls, stag = dict(calls or {}), dict(stag or {})
    rng = np.random.default_rng(0)
    per = {}
    for p in POLICIES:
        s = seeds if p == "irft" else 1
        d = {}
        for cost in ("20", "50"):
            r = sr.get(p, 0.9)
            succ = (rng.random((s, houses)) < r).astype(float)
            succ[:, : int(r * houses)] = 1.0
            succ[:, int(r * houses):] = 0.0
            v = sot.get(p, {}).get(cost, 0.2) if isinstance(sot.get(p), dict) else sot.get(p, 0.2)
            sots = np.clip(v + 0.05 * rng.normal(size=(s, houses)), 0, 1)
            sots -= sots.mean() - v
            c = calls.get(p, 10.0)
            e = {"success": succ, "spl": succ * 0.5, "sot": sots, "slow_calls": np.full((s, houses), c),
                 "stagnation_calls": np.full((s, houses), c * stag.get(p, 0.2))}
            d[cost] = {"episodes": {k: v.tolist() for k, v in e.items()}}
        per[p] = d
    return {"costs": ["20", "50"], "seeds": list(range(seeds)), "n_houses": houses, "per_policy": per}


def verdict(fn, m):
    return fn(m, ccfg()).verdict


@pytest.mark.parametrize("sot_e,sr_e,want", [(0.30, 0.9, "held"), (0.10, 0.9, "did not hold"),
                                             (0.30, 0.6, "partly")])
def test_verdict_irft_vs_heuristic(sot_e, sr_e, want):
    m = metrics(sot={"irft": sot_e, "heuristic": 0.2}, sr={"irft": sr_e, "heuristic": 0.9})
    assert verdict(report.claim_irft_vs_heuristic, m) == want


def test_verdict_irft_vs_heuristic_not_testable():
    assert verdict(report.claim_irft_vs_heuristic, metrics(seeds=1)) == "not testable at this scale"
    assert verdict(report.claim_irft_vs_heuristic, metrics(houses=20)) == "not testable at this scale"
    m = metrics()
    del m["per_policy"]["heuristic"]
    assert verdict(report.claim_irft_vs_heuristic, m) == "not testable at this scale"
    # the learned trigger does not beat the heuristic: said in words too
    c = report.claim_irft_vs_heuristic(metrics(sot={"irft": 0.1, "heuristic": 0.2}), ccfg())
    assert report.irft_answer(c).startswith("**No**")


@pytest.mark.parametrize("sot,want", [({"irft": 0.3, "every_5": 0.2, "every_10": 0.2}, "held"),
                                      ({"irft": 0.1, "every_5": 0.2, "every_10": 0.2}, "did not hold"),
                                      ({"irft": 0.25, "every_5": 0.2, "every_10": 0.3}, "partly")])
def test_verdict_adaptive_vs_fixed(sot, want):
    assert verdict(report.claim_adaptive_vs_fixed, metrics(sot=sot)) == want


def test_verdict_adaptive_vs_fixed_not_testable():
    assert verdict(report.claim_adaptive_vs_fixed, metrics(seeds=1)) == "not testable at this scale"


@pytest.mark.parametrize("stag,calls,want", [({"irft": 0.8, "every_5": 0.2}, 10.0, "held"),
                                             ({"irft": 0.1, "every_5": 0.2}, 10.0, "did not hold"),
                                             ({"irft": 0.8, "every_5": 0.2}, 0.0001, "not testable at this scale")])
def test_verdict_irft_calls_at_stagnation(stag, calls, want):
    m = metrics(stag=stag, calls={"irft": calls})
    assert verdict(report.claim_irft_calls_at_stagnation, m) == want


@pytest.mark.parametrize("sr,want", [({"slow_every_step": 0.95, "fast_only": 0.7}, "held"),
                                     ({"slow_every_step": 0.7, "fast_only": 0.9}, "did not hold"),
                                     ({"slow_every_step": 1.0, "fast_only": 1.0}, "not testable at this scale")])
def test_verdict_slow_raises_sr(sr, want):
    assert verdict(report.claim_slow_raises_sr, metrics(sr=sr)) == want


@pytest.mark.parametrize("sot,want", [({"slow_every_step": 0.05}, "held"), ({"slow_every_step": 0.5}, "did not hold")])
def test_verdict_every_step_lowest_sot(sot, want):
    assert verdict(report.claim_every_step_lowest_sot, metrics(sot=sot)) == want


def test_verdict_every_step_lowest_sot_not_testable():
    assert verdict(report.claim_every_step_lowest_sot, metrics(houses=20)) == "not testable at this scale"


@pytest.mark.parametrize("sr,want", [({"slow_every_step": 0.9, "heuristic": 0.9, "irft": 0.9}, "held"),
                                     ({"slow_every_step": 0.95, "heuristic": 0.6, "irft": 0.6}, "did not hold"),
                                     ({"slow_every_step": 0.9, "heuristic": 0.9, "irft": 0.6}, "partly")])
def test_verdict_adaptive_near_every_step_sr(sr, want):
    assert verdict(report.claim_adaptive_near_every_step_sr, metrics(sr=sr)) == want


def test_verdict_adaptive_near_every_step_sr_not_testable():
    m = metrics()
    del m["per_policy"]["slow_every_step"]
    assert verdict(report.claim_adaptive_near_every_step_sr, m) == "not testable at this scale"


@pytest.mark.parametrize("sot,want", [({"fast_only": 0.1, "heuristic": 0.2, "irft": 0.2}, "held"),
                                      ({"fast_only": 0.3, "heuristic": 0.2, "irft": 0.2}, "did not hold"),
                                      ({"fast_only": 0.15, "heuristic": 0.2, "irft": 0.1}, "partly")])
def test_verdict_adaptive_best_sot(sot, want):
    assert verdict(report.claim_adaptive_best_sot, metrics(sot=sot)) == want


def test_verdict_adaptive_best_sot_not_testable():
    m = metrics()
    del m["per_policy"]["fast_only"]
    assert verdict(report.claim_adaptive_best_sot, m) == "not testable at this scale"


def test_table_order_and_the_answer_wording():
    m = metrics()
    assert report.ordered(list(m["per_policy"])) == ["fast_only", "slow_every_step", "every_5", "every_10",
                                                      "heuristic", "irft"]
    c = report.claim_irft_vs_heuristic(metrics(sot={"irft": 0.3, "heuristic": 0.2}), ccfg())
    assert report.irft_answer(c).startswith("**Yes**")
