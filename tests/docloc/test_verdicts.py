"""Claim logic of the docloc summary on synthetic metrics: every claim gets a "held", a "did not hold"
and a "not testable" case. Thresholds are the schema defaults (docloc.claims.*)."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.core.config import validate_config
from paperflow.docloc import report

HELD, NOT_HELD, NT = "held", "did not hold", "not testable at this scale"
Q = 300


@pytest.fixture(scope="module")
def ccfg():
    c = validate_config({"docloc": {"enabled": False}})["docloc"]["claims"]
    c["bootstrap"]["n_boot"] = 300
    return c


def _run(arm, rate, seeds, *, anls=None, gain=0.2, stages=3, val_rate=None):
    """Per question u_q (shared by every arm: paired) → acc50 = u_q < rate; IoU, stage-1 IoU and ANLS from it."""
    u = np.random.default_rng(0).random(Q)
    sd = {}
    for s in range(seeds):
        acc = (u < rate + 0.01 * s).astype(float)
        iou = 0.8 * acc + 0.05
        first = iou - gain if stages > 1 else iou
        an = (u < (anls if anls is not None else rate) + 0.01 * s).astype(float)
        split = {"acc50": acc.tolist(), "iou": iou.tolist(), "mass": acc.tolist(), "em": an.tolist(),
                 "anls": an.tolist(), "qid": list(range(Q)), "iou_first": first.tolist(),
                 "iou_stages": list(np.linspace(first.mean(), iou.mean(), stages))}
        val = dict(split, acc50=(u < (val_rate if val_rate is not None else rate)).astype(float).tolist())
        sd[str(s)] = {"splits": {"val": val, "test_id": split, "test_ood": split}, "gamma": 1.0, "final_loss": 1.0}
    return {"arm": arm, "tau": 0.02, "stages": stages, "seeds": sd}


def metrics(rates, seeds=2, **kw):
    runs = {a: _run(a, r, seeds, stages=1 if a in ("single", "poe") else 3, **kw.get(a, {})) for a, r in rates.items()}
    return {"runs": runs, "mechanics": None}


def claim(claims, key):
    hit = [c for c in claims if key in c.claim]
    assert len(hit) == 1, [c.claim for c in claims]
    return hit[0]


BASE = {"single": 0.3, "now2": 0.4, "jko_b": 0.5, "jko_a": 0.45, "poe": 0.45}


def test_verdict_jko_vs_single(ccfg):
    c = claim(report.claims_main(metrics(BASE), ccfg), "One-step")
    assert c.verdict == HELD and "jko_b" in c.measured and c.sample.startswith("2 seeds × 300")
    assert claim(report.claims_main(metrics({**BASE, "single": 0.6}), ccfg), "One-step").verdict == NOT_HELD
    # a control at floor leaves nothing to beat; one seed is never enough
    c = claim(report.claims_main(metrics({**BASE, "single": 0.0}), ccfg), "One-step")
    assert c.verdict == NT and "floor" in c.reason
    assert claim(report.claims_main(metrics(BASE, seeds=1), ccfg), "One-step").verdict == NT


def test_verdict_jko_vs_now2(ccfg):
    assert claim(report.claims_main(metrics(BASE), ccfg), "W₂ (JKO) term").verdict == HELD
    claims = report.claims_main(metrics({**BASE, "now2": 0.6}), ccfg)
    assert claim(claims, "W₂ (JKO) term").verdict == NOT_HELD
    assert "explained by multi-stage supervision" in report.explanation(claims)
    missing = {k: v for k, v in BASE.items() if k != "now2"}
    assert claim(report.claims_main(metrics(missing), ccfg), "W₂ (JKO) term").verdict == NT


def test_verdict_jko_vs_poe(ccfg):
    assert claim(report.claims_main(metrics(BASE), ccfg), "coarse prior").verdict == HELD
    claims = report.claims_main(metrics({**BASE, "poe": 0.7}), ccfg)
    assert claim(claims, "coarse prior").verdict == NOT_HELD
    assert "explained by the coarse prior" in report.explanation(claims)
    assert "fine head alone" in report.explanation(claims, [0.0, 0.0])  # γ = 0: no coarse prior was used
    assert claim(report.claims_main(metrics({**BASE, "poe": 0.01}), ccfg), "coarse prior").verdict == NT


def test_verdict_jko_arm_is_chosen_on_validation(ccfg):
    # jko_a is better on test but worse on validation: jko_b is judged (no test-set selection)
    m = metrics({**BASE, "jko_a": 0.7}, jko_a={"val_rate": 0.2})
    assert report.jko_arm(m) == "jko_b"
    m = metrics({**BASE, "jko_a": 0.7})
    assert report.jko_arm(m) == "jko_a"


def test_verdict_now2_vs_single(ccfg):
    assert claim(report.claims_main(metrics(BASE), ccfg), "Multi-stage").verdict == HELD
    assert claim(report.claims_main(metrics({**BASE, "now2": 0.2}), ccfg), "Multi-stage").verdict == NOT_HELD
    assert claim(report.claims_main(metrics({**BASE, "single": 0.02}), ccfg), "Multi-stage").verdict == NT


def test_verdict_coarse_to_fine(ccfg):
    c = claim(report.claims_main(metrics(BASE), ccfg), "coarse-to-fine")
    assert c.verdict == HELD and "no-W2" in c.measured  # the control's curve is shown beside it
    m = metrics(BASE, jko_b={"gain": -0.1})
    assert claim(report.claims_main(m, ccfg), "coarse-to-fine").verdict == NOT_HELD
    nothing = metrics({**BASE, "jko_b": 0.0, "jko_a": 0.0}, jko_b={"gain": 0.0})
    nothing["runs"]["jko_b"]["seeds"]["0"]["splits"]["test_ood"]["iou"] = [0.0] * Q
    nothing["runs"]["jko_b"]["seeds"]["1"]["splits"]["test_ood"]["iou"] = [0.0] * Q
    assert claim(report.claims_main(nothing, ccfg), "coarse-to-fine").verdict == NT


def test_verdict_answers(ccfg):
    assert claim(report.claims_main(metrics(BASE), ccfg), "answers").verdict == HELD
    m = metrics(BASE, jko_b={"anls": 0.1})
    assert claim(report.claims_main(m, ccfg), "answers").verdict == NOT_HELD
    m = metrics(BASE, single={"anls": 0.0})
    assert claim(report.claims_main(m, ccfg), "answers").verdict == NT


def test_verdict_qualitative_combines_the_chain(ccfg):
    assert report.claim_qualitative(report.claims_main(metrics(BASE), ccfg)).verdict == HELD
    part = report.claim_qualitative(report.claims_main(metrics({**BASE, "now2": 0.6}), ccfg))
    assert part.verdict == "partly"  # JKO ≥ PoE and coarse-to-fine held, JKO > no-W2 did not
    nt = report.claim_qualitative(report.claims_main(metrics(BASE, seeds=1), ccfg))
    assert nt.verdict == NT


def _mech(jko, gibbs, poe, pages=80):
    u = np.random.default_rng(1).random(pages)
    res = {"gibbs": (u < gibbs).astype(float).tolist(), "coarse": (u < 0.6).astype(float).tolist(),
           "poe": (u < poe).astype(float).tolist(), "jko_t0.005_K3": (u < jko).astype(float).tolist()}
    return {"per_page": {"0.12": res, "0": res}, "params": {"judge_tau": 0.005, "judge_k": 3, "pages": pages}}


def test_verdict_mechanics(ccfg):
    g, p = report.claims_mechanics(_mech(0.9, 0.6, 0.7), ccfg)
    assert g.verdict == HELD and p.verdict == HELD
    g, p = report.claims_mechanics(_mech(0.6, 0.9, 0.95), ccfg)
    assert g.verdict == NOT_HELD and p.verdict == NOT_HELD
    g, p = report.claims_mechanics(_mech(0.9, 0.6, 1.0), ccfg)
    assert p.verdict == NT and "ceiling" in p.reason
    g, _ = report.claims_mechanics(_mech(0.9, 0.6, 0.7, pages=20), ccfg)
    assert g.verdict == NT and "minimum" in g.reason
    assert report.claims_mechanics(None, ccfg)[0].verdict == NT
