"""Claim logic of the mpdpac summary: for every claim, synthetic metrics that give held, did not hold and not
testable at this scale (the verdict comes from core.verdict.judge with the schema's thresholds)."""

from __future__ import annotations

import numpy as np
import pytest

from paperflow.core.config import validate_config
from paperflow.core.verdict import HELD, NOT_HELD, NOT_TESTABLE
from paperflow.mpdpac import plan, report

N = 200


@pytest.fixture(scope="module")
def rp():
    cfg = validate_config({"results_dir": "r", "data_dir": "d", "models_dir": "m", "mpdpac": {"enabled": True}})
    p = plan.report_params(cfg["mpdpac"])
    p["claims"]["n_boot"]["value"] = 200
    return p


def arm(dup: float = 0.05, recall: float = 0.8, cos: float = -0.5, vis: float = 0.3, active: float = 0.0,
        seed: int = 0) -> dict:
    """One arm's per-item results: 4 predicted objects per item, a `dup` share of them duplicates, `recall` of the
    4 true objects found; drift cos and visual attention around the given values (item noise)."""
    rng = np.random.default_rng(seed)
    n_dup = (rng.random((N, 4)) < dup).sum(axis=1).astype(float)
    n_tp = (rng.random((N, 4)) < recall).sum(axis=1).astype(float)
    c = cos + 0.05 * rng.standard_normal(N)
    return {"items": {"n_pred": [4.0] * N, "n_dup": n_dup.tolist(), "n_tp": np.minimum(n_tp, 4 - n_dup).tolist(),
                      "n_true": [4.0] * N, "seq_rep2": (n_dup / 8).tolist(), "n_tokens": [12.0] * N},
            "drift": {"item_cos": c.tolist(), "item_cos_late": c.tolist(), "item_cos_first": (c - 0.1).tolist()},
            "attention": {"item_visual": (vis + 0.01 * rng.standard_normal(N)).tolist(),
                          "item_object": (vis / 3 + 0.01 * rng.standard_normal(N)).tolist()},
            "summary": {"factor_nonzero_share": active}}


def metrics(**conds: dict) -> dict:
    return {"runs": {c: {a: {"0": r} for a, r in arms.items()} for c, arms in conds.items()}}


def one(claims, name_part: str):
    hits = [c for c in claims if name_part in c.claim]
    assert len(hits) == 1, [c.claim for c in claims]
    return hits[0]


def test_verdict_symptom(rp):
    cc, nb = rp["claims"], 200
    held = metrics(L48_t4={"base": arm(dup=0.2, seed=1)}, L20_t1={"base": arm(dup=0.02, seed=2)})
    assert report.claim_symptom(held, cc, nb).verdict == HELD
    flat = metrics(L48_t4={"base": arm(dup=0.02, seed=1)}, L20_t1={"base": arm(dup=0.1, seed=2)})
    assert report.claim_symptom(flat, cc, nb).verdict == NOT_HELD
    assert report.claim_symptom(metrics(L48_t4={"base": arm()}), cc, nb).verdict == NOT_TESTABLE
    small = dict(rp["claims"], symptom=dict(rp["claims"]["symptom"], min_n=10 * N))
    assert report.claim_symptom(held, small, nb).verdict == NOT_TESTABLE


def test_verdict_drift(rp):
    cc, nb = rp["claims"], 200
    assert report.claim_drift(metrics(L48_t4={"base": arm(cos=0.4)}), cc, nb).verdict == HELD
    anti = report.claim_drift(metrics(L48_t4={"base": arm(cos=-0.7)}), cc, nb)
    assert anti.verdict == NOT_HELD and "-0.7" in anti.measured
    assert report.claim_drift(metrics(L20_t1={"base": arm(cos=0.4)}), cc, nb).verdict == NOT_TESTABLE


def test_verdict_mps_vs_control(rp):
    cc, nb = rp["claims"], 200
    drift = arm(dup=0.2, cos=0.5, seed=1)
    held = metrics(L48_t4={"base": drift, "mps_l1": arm(dup=0.03, cos=0.5, active=0.6, seed=2),
                           "ctrl_l1": arm(dup=0.2, cos=0.5, active=0.5, seed=3)})
    assert report.claim_mps(held, cc, nb).verdict == HELD
    # MPS works, but no better than a random subspace at the same λ: the control explains it
    ctrl_too = metrics(L48_t4={"base": drift, "mps_l1": arm(dup=0.08, cos=0.5, active=0.6, seed=2),
                               "ctrl_l1": arm(dup=0.03, cos=0.5, active=0.5, seed=3)})
    assert report.claim_mps(ctrl_too, cc, nb).verdict == NOT_HELD
    # anti-aligned states: the clipped factor is (almost) always zero → MPS inactive, never "held"
    anti = arm(dup=0.2, cos=-0.6, seed=1)
    inactive = metrics(L48_t4={"base": anti, "mps_l1": arm(dup=0.03, cos=-0.6, active=0.01, seed=2),
                               "ctrl_l1": arm(dup=0.2, cos=-0.6, seed=3)})
    c = report.claim_mps(inactive, cc, nb)
    assert c.verdict == NOT_TESTABLE and "MPS inactive at this scale" in c.reason and "0.010" in c.reason
    floor = metrics(L48_t4={"base": arm(dup=0.0, cos=0.5, seed=1), "mps_l1": arm(dup=0.0, cos=0.5, active=0.6),
                            "ctrl_l1": arm(dup=0.0, cos=0.5, seed=3)})
    assert report.claim_mps(floor, cc, nb).verdict == NOT_TESTABLE


def test_mps_duplicates_that_fall_with_the_objects_do_not_count(rp):
    """6 Dec: on the first grounded backbone MPS (λ = 1) emptied its answers, so its duplicate rate fell to 0.
    A duplicate reduction with a clear F1 loss against the control is "did not hold"; a small F1 loss is not."""
    cc, nb = rp["claims"], 200
    drift = arm(dup=0.2, cos=0.5, seed=1)
    ctrl = arm(dup=0.2, cos=0.5, active=0.5, seed=3)
    empty = metrics(L48_t4={"base": drift, "mps_l1": arm(dup=0.0, recall=0.0, cos=0.5, active=0.6, seed=2),
                            "ctrl_l1": ctrl})
    c = report.claim_mps(empty, cc, nb)
    assert c.verdict == NOT_HELD and "only with the objects" in c.reason and "F1 control − MPS" in c.measured
    kept = metrics(L48_t4={"base": drift, "mps_l1": arm(dup=0.03, recall=0.78, cos=0.5, active=0.6, seed=2),
                           "ctrl_l1": ctrl})
    assert report.claim_mps(kept, cc, nb).verdict == HELD
    strict = dict(cc, mps_vs_control=dict(cc["mps_vs_control"], max_f1_loss=-1.0))  # any F1 change fails
    assert report.claim_mps(kept, strict, nb).verdict == NOT_HELD


def test_verdict_mrs_attention(rp):
    cc, nb = rp["claims"], 200
    up = metrics(L48_t4_v128={"base": arm(vis=0.30, seed=1), "mrs_b1": arm(vis=0.35, seed=2)})
    assert report.claim_mrs_attention(up, cc, nb).verdict == HELD
    down = metrics(L48_t4_v128={"base": arm(vis=0.30, seed=1), "mrs_b1": arm(vis=0.25, seed=2)})
    assert report.claim_mrs_attention(down, cc, nb).verdict == NOT_HELD
    assert report.claim_mrs_attention(metrics(L48_t4_v128={"base": arm()}), cc, nb).verdict == NOT_TESTABLE


@pytest.mark.parametrize("fn,cond,armname", [(report.claim_mrs_f1, "L48_t4_v128", "mrs_b1"),
                                             (report.claim_combined, "L48_t4", "both_l1_b1")])
def test_verdict_f1_claims(rp, fn, cond, armname):
    cc, nb = rp["claims"], 200
    better = metrics(**{cond: {"base": arm(dup=0.2, recall=0.5, seed=1), armname: arm(dup=0.05, recall=0.8, seed=2)}})
    assert fn(better, cc, nb).verdict == HELD
    worse = metrics(**{cond: {"base": arm(dup=0.2, recall=0.8, seed=1), armname: arm(dup=0.2, recall=0.5, seed=2)}})
    assert fn(worse, cc, nb).verdict == NOT_HELD
    # a baseline with no failure (F1 at ceiling, no duplicates) leaves nothing to repair
    perfect = metrics(**{cond: {"base": arm(dup=0.0, recall=1.0, seed=1), armname: arm(dup=0.0, recall=1.0, seed=2)}})
    c = fn(perfect, cc, nb)
    assert c.verdict == NOT_TESTABLE and "no failure" in c.reason
    # a baseline at the chance floor (4 objects of 36 kinds guessed: F1 ≈ 0.11) shows no grounding to restore
    floor = metrics(**{cond: {"base": arm(dup=0.2, recall=0.1, seed=1), armname: arm(dup=0.05, recall=0.8, seed=2)}})
    c = fn(floor, cc, nb)
    assert c.verdict == NOT_TESTABLE and "chance floor" in c.reason


def test_summary_lists_every_claim(rp, tmp_path):
    m = metrics(L48_t4={"base": arm(seed=1), "mps_l1": arm(seed=2), "ctrl_l1": arm(seed=3),
                        "both_l1_b1": arm(seed=4)},
                L20_t1={"base": arm(seed=5)}, L48_t4_v128={"base": arm(seed=6), "mrs_b1": arm(seed=7)})
    for c in m["runs"].values():
        for a in c.values():
            a["0"]["summary"].update(dup_rate=0.1, f1=0.5, precision=0.5, recall=0.5, seq_rep2=0.1, distinct2=0.2,
                                     cos_mean=-0.5)
    out = tmp_path / "summary.md"
    report.write(m, rp, out, [])
    text = out.read_text()
    assert text.count("| **") == 6 and "reconstruction" in text and "| L48_t4 | mps_l1 |" in text


def test_grounding_table_reports_own_vs_shuffled_f1(rp):
    m = metrics(L20_t1={"base": arm(dup=0.0, recall=0.8, seed=1), plan.SHUFFLED: arm(dup=0.0, recall=0.1, seed=2)},
                L48_t4={"base": arm()})
    t = report.grounding_table(m, 36, 200)
    row = [ln for ln in t.splitlines() if ln.startswith("| L20_t1")]
    assert len(row) == 1 and "L48_t4" not in t  # a condition without the control is left out
    f_own, f_shuf = (float(x) for x in row[0].split("|")[2:4])
    assert f_own > 0.7 and f_shuf < 0.2 and ("+0.6" in row[0] or "+0.7" in row[0])
    assert "no condition" in report.grounding_table(metrics(L48_t4={"base": arm()}), 36, 200)
