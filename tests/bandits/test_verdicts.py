"""Claim logic of the bandits summary, driven by synthetic metrics rows: every claim gets a "held", a
"did not hold" and a "not testable" case. Thresholds are the schema defaults (bandits.claims.*)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from paperflow.bandits import report
from paperflow.bandits.grid import make_grid
from paperflow.core.config import validate_config

HELD, NOT_HELD, NT = "held", "did not hold", "not testable at this scale"


@pytest.fixture(scope="module")
def ccfg():
    return validate_config({"bandits": {"enabled": False}})["bandits"]["claims"]


def noise(n, scale=0.03):
    """Deterministic per-seed multipliers (a CI needs spread)."""
    return 1.0 + scale * (np.arange(n) - (n - 1) / 2)


def row(variant, T, regret, *, runtime=None, exp="main", regime="small_k", K=20, d=10, beta=1.0, n_updates=None,
        stats=None, algo=None):
    regret = list(map(float, regret))
    n = len(regret)
    runtime = list(map(float, runtime if runtime is not None else [1e-4] * n))
    algo = algo or variant
    grid = make_grid(T) if algo in report.ELIM_FAMILY else None
    if n_updates is None:
        n_updates = [len(grid) - 1] * n if grid else ([T - 1] * n if algo == "linucb" else [10] * n)
    return {"exp": exp, "regime": regime, "variant": variant, "algo": algo, "K": K, "d": d, "T": T, "beta": beta,
            "seeds": list(range(n)), "final_regret": regret, "final_regret_mean": float(np.mean(regret)),
            "final_regret_se": 0.0, "n_updates": n_updates, "runtime_per_round_s": runtime,
            "runtime_per_round_s_mean": float(np.mean(runtime)), "runtime_per_round_s_se": 0.0,
            "stats": {k: float(np.mean(v)) for k, v in (stats or {}).items()}, "stats_per_seed": stats or {},
            "grid": grid}


def scaling_rows(variant, exponent, Ts=(1000, 10000, 100000, 1000000), seeds=5, c=1.0, **kw):
    return [row(variant, T, c * T**exponent * noise(seeds) * (1 + 0.01 * i), **kw) for i, T in enumerate(Ts)]


def only(claims, contains):
    hit = [c for c in claims if contains in c.claim]
    assert len(hit) == 1, [c.claim for c in claims]
    return hit[0]


# --- H1 ----------------------------------------------------------------------------------------------

def test_verdict_h1_updates(ccfg):
    rows = [row("blce", 10000, [500] * 3), row("linucb", 10000, [200] * 3)]
    assert report.claim_h1(rows, ccfg).verdict == HELD
    bad = copy.deepcopy(rows)
    bad[0]["n_updates"][1] += 1
    c = report.claim_h1(bad, ccfg)
    assert c.verdict == NOT_HELD and "violations" in c.measured and "none" not in c.measured
    assert report.claim_h1([row("rs_oful", 10000, [200] * 3)], ccfg).verdict == NT


# --- H2 ----------------------------------------------------------------------------------------------

def test_verdict_h2_slope(ccfg):
    held = report.claims_h2(scaling_rows("blce", 0.5), ccfg)
    c = only(held, "slope of R_T in")
    assert c.verdict == HELD and "5 seeds × 4 horizons" in c.sample and "no number in the paper" in c.paper
    assert only(report.claims_h2(scaling_rows("blce", 0.9), ccfg), "slope of R_T in").verdict == NOT_HELD
    assert only(report.claims_h2(scaling_rows("blce", 0.2), ccfg), "slope of R_T in").verdict == NOT_HELD
    # a T grid spanning < 2 decades cannot decide (the tiny default), nor can 2 seeds
    short = only(report.claims_h2(scaling_rows("blce", 0.5, Ts=(2000, 5000, 10000)), ccfg), "slope of R_T in")
    assert short.verdict == NT and "decades" in short.reason
    both = report.claims_h2(scaling_rows("blce", 0.5, Ts=(2000, 5000, 10000))
                            + scaling_rows("linucb", 0.5, Ts=(2000, 5000, 10000)), ccfg)
    assert len(both) == 1 and both[0].verdict == NT and "decades" in both[0].reason
    assert only(report.claims_h2(scaling_rows("blce", 0.5, seeds=2), ccfg), "slope of R_T in").verdict == NT
    # a CI covering one end of the interval leaves the claim undecided (never "partly")
    wide = scaling_rows("blce", 0.42)
    for i, r in enumerate(wide):
        r["final_regret"] = [y * (1 + 0.2 * (s - 2)) ** (i - 1) for s, y in enumerate(r["final_regret"])]
    assert only(report.claims_h2(wide, ccfg), "slope of R_T in").verdict == "inconclusive"
    # degenerate fit: zero regret at some seed
    zero = scaling_rows("blce", 0.5)
    zero[0]["final_regret"][2] = 0.0
    assert only(report.claims_h2(zero, ccfg), "slope of R_T in").verdict == NT


def test_verdict_h2_ratio(ccfg):
    lin = scaling_rows("linucb", 0.5, c=1.0)
    held = report.claims_h2(scaling_rows("blce", 0.5, c=4.0) + lin, ccfg)
    assert only(held, "R_T(blce)/R_T(linucb)").verdict == HELD
    grows = report.claims_h2(scaling_rows("blce", 0.75, c=1.0) + lin, ccfg)  # ratio slope 0.25 (as measured)
    c = only(grows, "R_T(blce)/R_T(linucb)")
    assert c.verdict == NOT_HELD and "paired with linucb" in c.sample
    few = report.claims_h2(scaling_rows("blce", 0.5, seeds=2) + scaling_rows("linucb", 0.5, seeds=2), ccfg)
    assert only(few, "R_T(blce)/R_T(linucb)").verdict == NT
    # labelled variants are judged too, never under BLCE's name
    lab = report.claims_h2(scaling_rows("stale_ucb", 0.5, c=2.0) + lin, ccfg)
    assert "labelled variant" in only(lab, "R_T(stale_ucb)").claim


# --- H3 ----------------------------------------------------------------------------------------------

def _cells(a_mult, seeds=5, Ts=(2000, 5000, 10000)):
    rows = []
    for T in Ts:
        base = 1000 * noise(seeds)
        rows += [row("nonadaptive", T, base), row("blce", T, base * a_mult)]
    return rows


def test_verdict_h3_adaptivity(ccfg):
    assert report.claim_h3_adaptivity(_cells(0.7), ccfg).verdict == HELD
    assert report.claim_h3_adaptivity(_cells(1.3), ccfg).verdict == NOT_HELD
    assert report.claim_h3_adaptivity(_cells(0.7, seeds=2), ccfg).verdict == NT


def test_verdict_h3_design(ccfg):
    def rows(mult, seeds=5):
        base = 1000 * noise(seeds)
        return [row("batch_elim_dg", 10000, base), row("blce", 10000, base * mult * noise(seeds, 0.01))]

    c = only(report.claims_h3_design(rows(0.8), ccfg), "batch_elim_dg")
    assert c.verdict == HELD and c.sample == "5 seeds (paired) × 1 cells"
    assert only(report.claims_h3_design(rows(1.5), ccfg), "batch_elim_dg").verdict == NOT_HELD
    assert only(report.claims_h3_design(rows(0.8, seeds=2), ccfg), "batch_elim_dg").verdict == NT


# --- H4 ----------------------------------------------------------------------------------------------

def _rt(variant, t, seeds=5, K=1000, d=5, T=10000, stats=None):
    return row(variant, T, [100.0] * seeds, runtime=t * noise(seeds, 0.02), K=K, d=d, regime="large_k", stats=stats)


def test_verdict_h4_vs_linucb(ccfg):
    def claim(ratio, seeds=5):
        return only(report.claims_h4([_rt("blce", ratio * 1e-4, seeds), _rt("linucb", 1e-4, seeds)], ccfg), "LinUCB's")

    assert claim(1.5).verdict == HELD
    c = claim(3.0)
    assert c.verdict == NOT_HELD and "no number in the paper" in c.paper
    assert claim(1.5, seeds=2).verdict == NT


def test_verdict_h4_vs_design(ccfg):
    def claim(base, ratio, seeds=5, K=1000):
        rows = [_rt("blce", 1e-4, seeds, K=K), _rt(base, ratio * 1e-4, seeds, K=K)]
        return only(report.claims_h4(rows, ccfg), f"{base} is")

    assert claim("batch_elim_dg", 12.0).verdict == HELD
    assert claim("batch_elim_dg", 2.0).verdict == NOT_HELD
    assert claim("batch_elim_dg", 12.0, seeds=2).verdict == NT
    # per-round designs: the claim is about K ≥ min_K
    assert claim("batch_elim_g", 12.0, K=20).verdict == NT
    assert claim("batch_elim_g", 12.0, K=1000).verdict == HELD
    # batch_elim_dg is judged at every K
    assert claim("batch_elim_dg", 2.0, K=20).verdict == NOT_HELD


def test_verdict_h4_dg_fit_share(ccfg):
    def claim(share, seeds=5):
        t = 1e-4 * noise(seeds, 0.02)
        r = row("batch_elim_dg", 10000, [100.0] * seeds, runtime=t, stats={"design_fit_s": list(share * t * 10000)})
        return only(report.claims_h4([r], ccfg), "design fit dominates")

    assert claim(0.8).verdict == HELD
    assert claim(0.1).verdict == NOT_HELD
    assert claim(0.8, seeds=2).verdict == NT


# --- labelled pilot variant and GLM ------------------------------------------------------------------

def test_verdict_pilot_stale_ucb(ccfg):
    def claim(ratio, seeds=5, lin=None):
        lin = 200 * noise(seeds) if lin is None else lin
        rows = [row("linucb", 10000, lin), row("stale_ucb", 10000, np.asarray(lin) * ratio * noise(seeds, 0.01))]
        return report.claims_pilot(rows, ccfg)[0]

    c = claim(2.0)
    assert c.verdict == HELD and "not the paper's BLCE" in c.claim
    assert claim(5.0).verdict == NOT_HELD
    assert claim(2.0, seeds=2).verdict == NT
    assert claim(2.0, lin=[0.0, 100, 110, 120, 130]).verdict == NT  # control at floor


def _glm(blce_mult=1.5, rt_ratio=8.0, solves=4, seeds=5, T=5000):
    base = 60 * noise(seeds)
    t = 1e-4 * noise(seeds, 0.02)
    return [row("glm_ucb_ons", T, base, exp="glm", regime="glm", runtime=t),
            row("blce_glm", T, base * blce_mult * noise(seeds, 0.01), exp="glm", regime="glm", runtime=t,
                stats={"mle_solves": [solves] * seeds, "newton_iters": [16] * seeds}),
            row("rs_glm", T, base, exp="glm", regime="glm", runtime=t * rt_ratio,
                stats={"mle_solves": [40] * seeds})]


def test_verdict_glm_regret(ccfg):
    assert only(report.claims_glm(_glm(1.5), ccfg), "within").verdict == HELD
    assert only(report.claims_glm(_glm(4.5), ccfg), "within").verdict == NOT_HELD
    assert only(report.claims_glm(_glm(1.5, seeds=2), ccfg), "within").verdict == NT


def test_verdict_glm_solves(ccfg):
    assert only(report.claims_glm(_glm(solves=4), ccfg), "MLE solves").verdict == HELD
    assert only(report.claims_glm(_glm(solves=40), ccfg), "MLE solves").verdict == NOT_HELD
    rows = _glm()
    rows[1]["stats_per_seed"] = {}
    assert only(report.claims_glm(rows, ccfg), "MLE solves").verdict == NT


def test_verdict_glm_runtime(ccfg):
    assert only(report.claims_glm(_glm(rt_ratio=8.0), ccfg), "RS-GLM's").verdict == HELD
    assert only(report.claims_glm(_glm(rt_ratio=1.2), ccfg), "RS-GLM's").verdict == NOT_HELD
    assert only(report.claims_glm(_glm(rt_ratio=8.0, seeds=2), ccfg), "RS-GLM's").verdict == NT


def test_verdict_thresholds_come_from_the_config(ccfg):
    """Moving a declared threshold moves the verdict: nothing is hard-coded in report code."""
    rows = [_rt("blce", 1.5e-4), _rt("linucb", 1e-4)]
    assert only(report.claims_h4(rows, ccfg), "LinUCB's").verdict == HELD
    strict = copy.deepcopy(ccfg)
    strict["h4_vs_linucb"]["threshold"] = 1.2
    c = only(report.claims_h4(rows, strict), "LinUCB's")
    assert c.verdict == NOT_HELD and "1.2×" in c.claim
