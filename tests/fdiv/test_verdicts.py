"""The fdiv claims' verdict logic on synthetic metrics: held / did not hold / not testable per claim (and the
tie, inconclusive and partly cases), with the thresholds the schema declares (`fdiv.claims.*`)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paperflow.core.config import load_config
from paperflow.core.verdict import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, PARTLY, Thresholds
from paperflow.fdiv import claims as C
from paperflow.fdiv import plan

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _test_config() -> dict[str, Any]:
    return load_config(REPO / "config/test.yaml")["fdiv"]  # validated: the schema's claim thresholds filled in


def _merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


def params(losses: list[str], seeds: int = 3, **sets: Any) -> dict[str, Any]:
    """The summary parameters of config/test.yaml with `losses`/`seeds` (schema defaults for the claims)."""
    cfg = copy.deepcopy(_test_config())
    _merge(cfg, {"losses": losses, "seeds": seeds, **sets})
    return plan.summary_params(cfg)


def stat(values: list[float | None]) -> dict[str, Any]:
    finite = [v for v in values if v is not None]
    return {"mean": float(np.mean(finite)) if finite else None, "se": 0.0, "n_finite": len(finite), "values": values}


def rule(p: dict[str, Any], key: str) -> Thresholds:
    return Thresholds.from_config(p["claims"][key])


IDN = {"all_pass": True, "t1_max_rel_err": 2e-15, "t1_pass_all": True, "correspondence_max_err": 9e-13,
       "t2_js_cosine_wrong_centre": {"tabular": 0.994, "gauss": 0.9998}, "t3_min_cosine": 0.99999,
       "t5_max_l1_ftb": 6e-9, "t5_l1_learned_logz": {"tb": {"uniform": 1e-15, "dirichlet": 2e-3}},
       "divergences": ["forward_kl", "js", "reverse_kl"], "losses": ["rkl", "js", "tb"]}


# ------------------------------------------------------------------------------ exact identities
def test_verdict_gradient_identity():
    r = rule(params(["rkl", "js"]), "gradient_identity")
    assert C.gradient_identity(IDN, r).verdict == HELD
    assert C.gradient_identity({**IDN, "t1_max_rel_err": 3e-6}, r).verdict == NOT_HELD
    assert C.gradient_identity({**IDN, "t1_pass_all": False}, r).verdict == NOT_HELD  # a negative scalar
    assert C.gradient_identity({**IDN, "t1_max_rel_err": float("nan")}, r).verdict == NOT_TESTABLE


def test_verdict_batch_estimator():
    p = params(["rkl", "js", "tb"])
    r = rule(p, "batch_estimator")
    assert C.batch_estimator(IDN, p, r).verdict == HELD
    assert C.batch_estimator({**IDN, "t3_min_cosine": 0.95}, p, r).verdict == NOT_HELD
    only_tb = params(["tb"])
    assert C.batch_estimator({**IDN, "t3_min_cosine": None}, only_tb, r).verdict == NOT_TESTABLE


def test_verdict_offpolicy_minimiser():
    p = params(["rkl", "js", "tb"])
    r = rule(p, "offpolicy_minimiser")
    c = C.offpolicy_minimiser(IDN, p, r)
    assert c.verdict == HELD and "tb 2.0e-03" in c.measured  # the learned-log Z baseline is reported, not judged
    assert C.offpolicy_minimiser({**IDN, "t5_max_l1_ftb": 0.05}, p, r).verdict == NOT_HELD
    assert C.offpolicy_minimiser({**IDN, "t5_max_l1_ftb": None}, params(["tb"]), r).verdict == NOT_TESTABLE


# ------------------------------------------------------------------------------ E1 mode seeking vs covering
def gmm_gaussian(cov: dict[str, list[float]]) -> dict[str, Any]:
    return {"gmm": {"gaussian": {name: {"onpolicy": {"coverage": stat(v), "kl_pq": stat([1.0] * len(v))}}
                                 for name, v in cov.items()}}}


def test_verdict_mode_covering_held():
    p = params(["rkl", "js", "tb"])
    c = C.mode_covering(gmm_gaussian({"rkl": [3, 3, 4], "tb": [3, 2, 3], "js": [8, 8, 7]}), p,
                        rule(p, "mode_covering"))
    assert c.verdict == HELD, c.reason
    assert "3 seeds" in c.sample and c.paper == "no number in the paper"


def test_verdict_mode_covering_did_not_hold():
    p = params(["rkl", "js", "tb"])
    c = C.mode_covering(gmm_gaussian({"rkl": [8, 8, 8], "tb": [8, 7, 8], "js": [3, 4, 3]}), p,
                        rule(p, "mode_covering"))
    assert c.verdict == NOT_HELD


def test_verdict_mode_covering_tie_is_not_partly():
    """No separation at all (every loss covers the same number of modes) is 'did not hold', never 'partly'."""
    p = params(["rkl", "js", "tb"])
    c = C.mode_covering(gmm_gaussian({"rkl": [8, 8, 8], "tb": [8, 8, 8], "js": [8, 8, 8]}), p,
                        rule(p, "mode_covering"))
    assert c.verdict == NOT_HELD, c.reason
    # a tie on average with spread across seeds: the CI covers 0 → inconclusive
    c = C.mode_covering(gmm_gaussian({"rkl": [3, 8, 5], "tb": [3, 3, 3], "js": [8, 3, 5]}), p,
                        rule(p, "mode_covering"))
    assert c.verdict == INCONCLUSIVE, c.reason


def test_verdict_mode_covering_not_testable():
    p1 = params(["rkl", "js", "tb"], seeds=1)  # one seed: below min_n
    c = C.mode_covering(gmm_gaussian({"rkl": [3], "tb": [3], "js": [8]}), p1, rule(p1, "mode_covering"))
    assert c.verdict == NOT_TESTABLE and "1 seed" in c.sample
    p = params(["rkl", "tb"])  # no mode-covering loss configured
    c = C.mode_covering(gmm_gaussian({"rkl": [3, 3, 3], "tb": [3, 3, 3]}), p, rule(p, "mode_covering"))
    assert c.verdict == NOT_TESTABLE


# ------------------------------------------------------------------------------ off-policy convergence
def tabular(l1: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    return {"gmm": {"tabular": {name: {b: {"l1_grid": stat(v)} for b, v in bs.items()} for name, bs in l1.items()}}}


def test_verdict_offpolicy_tabular():
    p = params(["rkl", "js", "tb"])
    r = rule(p, "offpolicy_tabular")
    good = {"onpolicy": [0.1, 0.1, 0.1], "proposal": [0.1, 0.12, 0.11], "stale": [0.05, 0.06, 0.04]}
    bad = {"onpolicy": [0.1, 0.1, 0.1], "proposal": [1.9, 1.8, 1.95], "stale": [1.2, 1.3, 1.1]}
    tb_bad = {"rkl": good, "js": good, "tb": bad}  # tb (learned log Z) is a baseline, not an f-TB loss
    assert C.offpolicy_tabular(tabular(tb_bad), p, r).verdict == HELD
    assert C.offpolicy_tabular(tabular({"rkl": bad, "js": bad, "tb": bad}), p, r).verdict == NOT_HELD
    assert C.offpolicy_tabular(tabular({"rkl": good, "js": bad, "tb": good}), p, r).verdict == PARTLY
    p1 = params(["rkl", "js", "tb"], seeds=1)
    one = {b: v[:1] for b, v in good.items()}
    assert C.offpolicy_tabular(tabular({"rkl": one, "js": one, "tb": one}), p1, r).verdict == NOT_TESTABLE


def hyper(l1: dict[str, dict[str, list[float]]], steps: dict[str, list[float | None]] | None = None) -> dict:
    out: dict[str, Any] = {}
    for name, bs in l1.items():
        out[name] = {b: {"l1": stat(v), "all_modes_captured_step": stat((steps or {}).get(name, [None] * len(v)))}
                     for b, v in bs.items()}
    return {"hypergrid": out}


def test_verdict_offpolicy_hypergrid():
    p = params(["rkl", "js", "tb"])
    r = rule(p, "offpolicy_hypergrid")
    good = {"onpolicy": [0.03] * 3, "lag5": [0.04, 0.05, 0.03], "uniform": [0.1, 0.12, 0.09]}
    bad = {"onpolicy": [0.03] * 3, "lag5": [1.9, 1.94, 1.93], "uniform": [1.9, 1.94, 1.95]}
    assert C.offpolicy_hypergrid(hyper({"rkl": good, "js": good, "tb": bad}), p, r).verdict == HELD
    assert C.offpolicy_hypergrid(hyper({"rkl": bad, "js": bad, "tb": good}), p, r).verdict == NOT_HELD
    near = {"onpolicy": [0.03] * 3, "lag5": [0.1, 0.3, 0.2], "uniform": [0.1, 0.3, 0.2]}  # CI covers 0.2
    assert C.offpolicy_hypergrid(hyper({"rkl": near, "js": near, "tb": near}), p, r).verdict == INCONCLUSIVE
    p1 = params(["rkl", "js", "tb"], seeds=1)
    one = {b: v[:1] for b, v in good.items()}
    assert C.offpolicy_hypergrid(hyper({"rkl": one, "js": one, "tb": one}), p1, r).verdict == NOT_TESTABLE


# ------------------------------------------------------------------------------ E2 speed of mode capture
def test_verdict_capture_speed():
    p = params(["rkl", "hellinger", "fkl", "tb"], hypergrid={"steps": 500})
    r = rule(p, "capture_speed")
    l1 = {n: {"onpolicy": [0.03] * 3} for n in ("rkl", "hellinger", "fkl", "tb")}
    p["hypergrid"]["behaviours"] = ["onpolicy"]
    sooner = {"rkl": [450, 400, 425], "hellinger": [175, 200, 150], "fkl": [175, 150, 175], "tb": [None] * 3}
    assert C.capture_speed(hyper(l1, sooner), p, r).verdict == HELD
    later = {"rkl": [100, 125, 100], "hellinger": [175, 200, 150], "fkl": [175, 150, 175], "tb": [None] * 3}
    assert C.capture_speed(hyper(l1, later), p, r).verdict == NOT_HELD
    never = {n: [None] * 3 for n in l1}
    c = C.capture_speed(hyper(l1, never), p, r)
    assert c.verdict == NOT_TESTABLE and "budget" in c.reason
    p_no_cover = params(["rkl", "js", "tb"])  # no alpha_linex in {0.5, 1} f-TB loss
    assert C.capture_speed(hyper({n: {"onpolicy": [0.03] * 3} for n in ("rkl", "js", "tb")}), p_no_cover,
                           r).verdict == NOT_TESTABLE


# ------------------------------------------------------------------------------ non-alpha f, log-partition centre
def test_verdict_logz_centre_offpolicy():
    p = params(["rkl", "js", "js_prof"])
    rt, rh = rule(p, "offpolicy_tabular"), rule(p, "offpolicy_hypergrid")
    good_h = {"onpolicy": [0.03] * 3, "lag5": [0.04] * 3, "uniform": [0.05, 0.06, 0.04]}
    bad_h = {"onpolicy": [0.03] * 3, "lag5": [1.94] * 3, "uniform": [1.9, 1.95, 1.94]}
    good_t = {"onpolicy": [0.1] * 3, "proposal": [0.1, 0.12, 0.08], "stale": [0.1, 0.11, 0.09]}
    bad_t = {"onpolicy": [0.1] * 3, "proposal": [2.0, 1.99, 2.0], "stale": [1.9, 1.95, 2.0]}

    def met(js_h, js_t):
        m = hyper({"rkl": good_h, "js": js_h, "js_prof": good_h})
        m.update(tabular({"rkl": good_t, "js": js_t, "js_prof": good_t}))
        return m

    assert C.logz_centre_offpolicy(met(good_h, good_t), p, rt, rh).verdict == HELD
    c = C.logz_centre_offpolicy(met(bad_h, bad_t), p, rt, rh)
    assert c.verdict == NOT_HELD and "js_prof" in c.measured  # the contrast is shown, not judged
    assert C.logz_centre_offpolicy(met(good_h, bad_t), p, rt, rh).verdict == PARTLY
    p1 = params(["rkl", "js"], seeds=1)
    one_h = {b: v[:1] for b, v in good_h.items()}
    one_t = {b: v[:1] for b, v in good_t.items()}
    m1 = hyper({"rkl": one_h, "js": one_h})
    m1.update(tabular({"rkl": one_t, "js": one_t}))
    assert C.logz_centre_offpolicy(m1, p1, rt, rh).verdict == NOT_TESTABLE
    assert C.logz_centre_offpolicy(m1, params(["rkl", "tb"], seeds=1), rt, rh) is None  # no such loss configured


def test_verdict_thresholds_come_from_the_config():
    p = params(["rkl", "js", "tb"], claims={"offpolicy_hypergrid": {"threshold": 2.0}})
    mid = {"onpolicy": [0.03] * 3, "lag5": [1.0, 1.1, 0.9], "uniform": [1.0, 1.2, 0.9]}
    met = hyper({"rkl": mid, "js": mid, "tb": mid})
    assert C.offpolicy_hypergrid(met, p, rule(p, "offpolicy_hypergrid")).verdict == HELD
    p = params(["rkl", "js", "tb"])
    assert C.offpolicy_hypergrid(met, p, rule(p, "offpolicy_hypergrid")).verdict == NOT_HELD


@pytest.mark.parametrize("seeds", [1, 3])
def test_verdict_every_claim_states_seeds_sample_and_paper(seeds):
    p = params(["rkl", "js", "tb"], seeds=seeds)
    vals = [0.1] * seeds
    m = {"identity": IDN, **gmm_gaussian({"rkl": [3] * seeds, "tb": [3] * seeds, "js": [8] * seeds})}
    m["gmm"].update(tabular({n: {b: vals for b in ("onpolicy", "proposal", "stale")} for n in ("rkl", "js", "tb")})["gmm"])
    m.update(hyper({n: {b: vals for b in ("onpolicy", "lag5", "uniform")} for n in ("rkl", "js", "tb")}))
    cl = C.claims(m, p)
    assert len(cl) == 8
    for c in cl:
        assert c.sample and c.paper == "no number in the paper" and c.reason, c
    seed_word = "1 seed" if seeds == 1 else f"{seeds} seeds"
    assert all(seed_word in c.sample for c in cl[3:])
    if seeds == 1:  # one seed decides nothing that needs a spread across seeds
        assert all(c.verdict == NOT_TESTABLE for c in cl[3:])
        assert "(1 seed, no s.e.)" in cl[3].measured and "± 0" not in cl[3].measured
