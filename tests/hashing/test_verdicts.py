"""Claim logic of the hashing report on synthetic metrics: every claim has a held, a did-not-hold and a
not-testable case; every configured dataset is judged; chance-level numbers never give "held"."""

from __future__ import annotations

import pytest

from paperflow.core.config import validate_config
from paperflow.hashing import report as R

HELD, NOT_HELD, NT = "held", "did not hold", "not testable at this scale"
SEEDS = [10, 11, 12]
JITTER = (0.0, 0.004, -0.003)  # seed-to-seed spread (rotated per cell), so paired t CIs are real intervals


@pytest.fixture(scope="module")
def cfg():
    return validate_config({"hashing": {"enabled": True}})["hashing"]["claims"]


def _row(ds, m, b, mode, r, mean, seeds=SEEDS, auroc=None):
    k = sum(map(ord, f"{m}{mode}{r}{b}")) % 3  # a different seed pattern per cell: paired differences vary
    vals = [mean + JITTER[(i + k) % 3] for i in range(len(seeds))]
    row = {"selection": "noisy_val", "dataset": ds, "method": m, "bits": b, "mode": mode, "rate": r,
           "seeds": list(seeds), "i2t_per_seed": vals, "t2i_per_seed": vals, "mean_per_seed": vals}
    if auroc is not None:
        row["w_auroc_per_seed"] = [auroc + JITTER[(i + k) % 3] for i in range(len(seeds))]
    return row


def _metrics(cells, ds=("synth",), chance=0.05, bits=(16,), records=None, fmt="xmedia", synthetic=True,
             seeds=SEEDS):
    """cells: {(method, mode, rate): mean mAP or (mean, auroc)} -> a metrics.json-shaped dict."""
    rows = []
    for d in ds:
        for (m, mode, r), v in cells.items():
            mean, auc = v if isinstance(v, tuple) else (v, None)
            for b in bits:
                rows.append(_row(d, m, b, mode, r, mean, seeds, auc))
    return {"primary_selection": "noisy_val", "runs_table": rows,
            "noise_records": records if records is not None else [],
            "chance": {d: {str(b): {"mean": chance, "max": chance + 0.005, "n_query": 500, "n_database": 500}
                           for b in bits} for d in ds},
            "datasets": {d: {"format": fmt, "synthetic": synthetic} for d in ds},
            "roles": {"plain": "baseline", "small_loss": "baseline", "label_smooth": "baseline", "rfcmh": "proposed",
                      "rfcmh_paper": "variant"}}


def _one(metrics, cfg, func):
    V = R.Views(metrics)
    return [func(V, ds, cfg) for ds in V.datasets]


# ---- degrades least -------------------------------------------------------------------------------


def test_verdict_degrades_least_held(cfg):
    m = _metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.85,
                  ("plain", "sym", 0.0): 0.80, ("plain", "sym", 0.8): 0.20})
    (c,) = _one(m, cfg, R.claim_degrades_least)
    assert c.verdict == HELD, c.reason
    assert "3 seeds × 500 queries" in c.sample


def test_verdict_degrades_least_did_not_hold(cfg):
    m = _metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.40,
                  ("plain", "sym", 0.0): 0.80, ("plain", "sym", 0.8): 0.78})
    (c,) = _one(m, cfg, R.claim_degrades_least)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_degrades_least_not_testable_at_chance(cfg):
    """The old smoke run: every mAP ≈ 0.1 with random codes at 0.09 — no signal to lose."""
    m = _metrics({("rfcmh", "sym", 0.0): 0.105, ("rfcmh", "sym", 0.5): 0.106,
                  ("plain", "sym", 0.0): 0.096, ("plain", "sym", 0.5): 0.100}, chance=0.09)
    (c,) = _one(m, cfg, R.claim_degrades_least)
    assert c.verdict == NT and "random-code mAP" in c.reason


def test_verdict_degrades_least_names_only_methods_that_ran(cfg):
    m = _metrics({("rfcmh", "sym", 0.0): 0.9, ("rfcmh", "sym", 0.8): 0.85, ("plain", "sym", 0.0): 0.8,
                  ("plain", "sym", 0.8): 0.2, ("rfcmh_paper", "sym", 0.0): 0.8, ("rfcmh_paper", "sym", 0.8): 0.1})
    (c,) = _one(m, cfg, R.claim_degrades_least)
    assert "rfcmh, plain" in c.claim and "small_loss" not in c.claim and "four" not in c.claim
    assert "rfcmh_paper" not in c.measured  # a variant, not a competitor


def test_verdict_one_seed_is_not_testable_and_prints_no_zero_se(cfg):
    m = _metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.85, ("plain", "sym", 0.0): 0.80,
                  ("plain", "sym", 0.8): 0.20}, seeds=[10])
    (d,) = _one(m, cfg, R.claim_degrades_least)
    (r,) = _one(m, cfg, R.claim_retention)
    assert d.verdict == NT and r.verdict == NT and "below the declared minimum" in r.reason
    assert "± 0.000" not in r.measured and "(1 seed, no s.e.)" in r.measured
    assert d.sample.startswith("1 seed ")


# ---- retention ----------------------------------------------------------------------------------------


def test_verdict_retention_held(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.86}), cfg, R.claim_retention)
    assert c.verdict == HELD, c.reason


def test_verdict_retention_did_not_hold(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.50}), cfg, R.claim_retention)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_retention_not_testable_at_chance(cfg):
    """Random codes score the same mAP: 101% 'retention' of a chance-level model is no evidence."""
    (c,) = _one(_metrics({("rfcmh", "sym", 0.0): 0.105, ("rfcmh", "sym", 0.5): 0.106}, chance=0.09), cfg,
                R.claim_retention)
    assert c.verdict == NT and "random-code mAP 0.090" in c.reason


def test_verdict_retention_not_testable_when_only_noisy_model_at_chance(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.0): 0.60, ("rfcmh", "sym", 0.8): 0.12}, chance=0.09), cfg,
                R.claim_retention)
    assert c.verdict == NT and "noisy" in c.reason


# ---- best at high noise --------------------------------------------------------------------------------


def test_verdict_best_at_high_noise_held(cfg):
    m = _metrics({("rfcmh", "sym", 0.8): 0.75, ("plain", "sym", 0.8): 0.20, ("small_loss", "sym", 0.8): 0.5})
    (c,) = _one(m, cfg, R.claim_best_at_high_noise)
    assert c.verdict == HELD, c.reason
    assert "plain, small_loss" in c.claim


def test_verdict_best_at_high_noise_did_not_hold(cfg):
    m = _metrics({("rfcmh", "sym", 0.8): 0.30, ("plain", "sym", 0.8): 0.60})
    (c,) = _one(m, cfg, R.claim_best_at_high_noise)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_best_at_high_noise_not_testable(cfg):
    both_at_chance = _metrics({("rfcmh", "sym", 0.8): 0.07, ("plain", "sym", 0.8): 0.06})
    assert _one(both_at_chance, cfg, R.claim_best_at_high_noise)[0].verdict == NT
    no_high_rate = _metrics({("rfcmh", "sym", 0.5): 0.8, ("plain", "sym", 0.5): 0.3})
    assert _one(no_high_rate, cfg, R.claim_best_at_high_noise)[0].verdict == NT


# ---- clean parity ---------------------------------------------------------------------------------------


def test_verdict_clean_parity_held(cfg):
    (c,) = _one(_metrics({("plain", "sym", 0.0): 0.80, ("rfcmh", "sym", 0.0): 0.81}), cfg, R.claim_clean_parity)
    assert c.verdict == HELD, c.reason


def test_verdict_clean_parity_did_not_hold(cfg):
    (c,) = _one(_metrics({("plain", "sym", 0.0): 0.80, ("rfcmh", "sym", 0.0): 0.60}), cfg, R.claim_clean_parity)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_clean_parity_not_testable_when_oracle_at_chance(cfg):
    (c,) = _one(_metrics({("plain", "sym", 0.0): 0.07, ("rfcmh", "sym", 0.0): 0.07}), cfg, R.claim_clean_parity)
    assert c.verdict == NT and "clean oracle" in c.reason


# ---- asymmetric noise ---------------------------------------------------------------------------------


def test_verdict_asym_held(cfg):
    (c,) = _one(_metrics({("rfcmh", "asym", 0.4): 0.80, ("plain", "asym", 0.4): 0.55}), cfg, R.claim_asym)
    assert c.verdict == HELD, c.reason


def test_verdict_asym_did_not_hold(cfg):
    (c,) = _one(_metrics({("rfcmh", "asym", 0.4): 0.40, ("plain", "asym", 0.4): 0.60}), cfg, R.claim_asym)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_asym_not_testable_without_asym_runs(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.4): 0.80, ("plain", "sym", 0.4): 0.55}), cfg, R.claim_asym)
    assert c.verdict == NT


# ---- reliability AUROC -----------------------------------------------------------------------------------


def test_verdict_reliability_auroc_held(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.4): (0.8, 0.97)}), cfg, R.claim_reliability_auroc)
    assert c.verdict == HELD, c.reason


def test_verdict_reliability_auroc_did_not_hold(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.4): (0.8, 0.6)}), cfg, R.claim_reliability_auroc)
    assert c.verdict == NOT_HELD, c.reason


def test_verdict_reliability_auroc_not_testable(cfg):
    one_seed = _metrics({("rfcmh", "sym", 0.4): (0.8, 0.97)}, seeds=[10])
    assert _one(one_seed, cfg, R.claim_reliability_auroc)[0].verdict == NT
    only_high_noise = _metrics({("rfcmh", "sym", 0.8): (0.8, 0.97)})
    assert _one(only_high_noise, cfg, R.claim_reliability_auroc)[0].verdict == NT


# ---- noise records ------------------------------------------------------------------------------------------


def _rec(n_changed, mode="sym"):
    return {"file": "x.json", "requested_rate": 0.5, "n": 200, "n_changed": n_changed, "realized_rate": n_changed / 200,
            "mode": mode, "dataset": "synth"}


def test_verdict_noise_exact_held(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.5): 0.5}, records=[_rec(100), _rec(100)]), cfg, R.claim_noise_exact)
    assert c.verdict == HELD and "2/2" in c.measured


def test_verdict_noise_exact_did_not_hold(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.5): 0.5}, records=[_rec(100), _rec(99)]), cfg, R.claim_noise_exact)
    assert c.verdict == NOT_HELD


def test_verdict_noise_exact_not_testable(cfg):
    (c,) = _one(_metrics({("rfcmh", "sym", 0.5): 0.5}, records=[_rec(80, "asym")]), cfg, R.claim_noise_exact)
    assert c.verdict == NT


# ---- paper headline ------------------------------------------------------------------------------------------


def test_verdict_headline_held_on_an_official_pack(cfg):
    m = _metrics({("rfcmh", "sym", 0.8): 0.89}, ds=("xmedia",), synthetic=False)  # paper 88.1 / 86.1 at 16 bits
    (c,) = _one(m, cfg, R.claim_headline)
    assert c.verdict == HELD, c.reason
    assert "0.881" in c.paper


def test_verdict_headline_did_not_hold(cfg):
    m = _metrics({("rfcmh", "sym", 0.8): 0.50}, ds=("xmedia",), synthetic=False)
    assert _one(m, cfg, R.claim_headline)[0].verdict == NOT_HELD


def test_verdict_headline_not_testable_on_synthetic_data(cfg):
    assert _one(_metrics({("rfcmh", "sym", 0.8): 0.89}), cfg, R.claim_headline)[0].verdict == NT


# ---- every dataset, declared thresholds --------------------------------------------------------------------


def test_verdict_every_dataset_is_judged(cfg):
    """config/paper.yaml has three datasets: each gets its own row of every claim."""
    m = _metrics({("rfcmh", "sym", 0.0): 0.9, ("rfcmh", "sym", 0.8): 0.85, ("plain", "sym", 0.0): 0.8,
                  ("plain", "sym", 0.8): 0.2}, ds=("inria", "xmedia", "xmedianet"), synthetic=False)
    m["datasets"] = {d: {"format": d, "synthetic": False} for d in ("inria", "xmedia", "xmedianet")}
    claims = R.judge_claims(m, cfg)
    assert len(claims) == len(R.CLAIMS) * 3
    for ds in ("inria", "xmedia", "xmedianet"):
        rows = [c for c in claims if c.claim.startswith(ds + ":")]
        assert len(rows) == len(R.CLAIMS)
        assert next(c for c in rows if "degrades least" in c.claim).verdict == HELD
    assert all(c.sample and c.paper for c in claims)


def test_verdict_thresholds_come_from_the_config(cfg):
    m = _metrics({("rfcmh", "sym", 0.0): 0.90, ("rfcmh", "sym", 0.8): 0.70})  # retention ≈ 78%
    assert _one(m, cfg, R.claim_retention)[0].verdict == NOT_HELD
    lenient = {**cfg, "retention": {**cfg["retention"], "threshold": 0.7}}
    assert _one(m, lenient, R.claim_retention)[0].verdict == HELD
