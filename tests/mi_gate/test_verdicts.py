"""Claim logic of the mi_gate summary on synthetic metrics: every claim gets a "held", a "did not hold" and a
"not testable" case. Thresholds are the schema defaults (mi_gate.claims.*)."""

from __future__ import annotations

import pytest

from paperflow.core.config import validate_config
from paperflow.mi_gate import report

HELD, NOT_HELD, NT = "held", "did not hold", "not testable at this scale"
CONDS = ("clean", "noise1", "noise2", "dropout", "occlusion", "worddrop")
JITTER = (0.0, 0.003, -0.003, 0.002, -0.002)


@pytest.fixture(scope="module")
def cfg():
    return validate_config({"mi_gate": {"enabled": False}})["mi_gate"]


def _seed(s, *, vie=0.1, vie_t0=None, cons=0.9, clean=0.9, r=0.1, uv=0.2, share=0.4, reest=True):
    j = JITTER[s % len(JITTER)]
    test = {}
    for tv in ("T0", "T1"):
        v = (vie if tv == "T1" or vie_t0 is None else vie_t0) + j
        test[tv] = {c: {"acc": clean + j if c == "clean" else clean - 0.1, "vie": 0.0 if c == "clean" else v,
                        "consistency": 1.0 if c == "clean" else cons + j, "per_type": {}} for c in CONDS}
    rec = {"seed": s, "n_augmented": 10, "test": test, "val_acc": clean}
    if reest:
        rec["interactions"] = {"means": {"r": r + j, "u_v": uv + j, "u_t": 0.1, "s": 0.1},
                               "raw_means": {"r": r, "u_v": uv, "u_t": 0.1, "s": 0.1},
                               "shares": {"r": 0.3, "u_v": share + j, "u_t": 0.1, "s": 0.2}, "delta": 0.0}
    return rec


def _runs(arms, seeds=3, **kw):
    """arms: variant → keyword overrides of _seed."""
    out = {}
    for v, over in arms.items():
        arm, tau = ("original", None) if v == "original" else (v.rsplit("_t", 1)[0], float(v.rsplit("_t", 1)[1]))
        out[v] = {"arm": arm, "tau": tau, "seeds": {str(s): _seed(s, **{**kw, **over}) for s in range(seeds)}}
    return {"runs": out, "gate": {}}


def by_name(claims, text):
    return next(c for c in claims if text in c.claim)


def test_transfer(cfg):
    cc = cfg["claims"]
    good = _runs({"original": {}, "gated_t0.25": {"r": 0.3, "uv": 0.05, "share": 0.2}})
    c1, c2 = report.claim_transfer(good, cc)
    assert c1.verdict == HELD and c2.verdict == HELD
    pinned = _runs({"original": {}, "gated_t0.25": {"r": 0.1, "uv": 0.2, "share": 0.6}})
    c1, c2 = report.claim_transfer(pinned, cc)
    assert c1.verdict == NOT_HELD and c2.verdict == NOT_HELD
    assert all(c.verdict == NT for c in report.claim_transfer(_runs({"original": {}, "gated_t0.25": {}}, seeds=2), cc))
    assert all(c.verdict == NT for c in report.claim_transfer(_runs({"original": {}, "gated_t0.25": {}}, reest=False), cc))
    assert all(c.verdict == NT for c in report.claim_transfer(_runs({"original": {}}), cc))


def test_vie_vs_controls(cfg):
    cc = cfg["claims"]
    held = _runs({"gated_t0.25": {"vie": 0.05}, "random_t0.25": {"vie": 0.1}, "words_t0.25": {"vie": 0.12}})
    assert report.claim_vie_controls(held, cc).verdict == HELD
    worse = _runs({"gated_t0.25": {"vie": 0.2}, "random_t0.25": {"vie": 0.1}, "words_t0.25": {"vie": 0.12}})
    assert report.claim_vie_controls(worse, cc).verdict == NOT_HELD
    half = _runs({"gated_t0.25": {"vie": 0.1}, "random_t0.25": {"vie": 0.05}, "words_t0.25": {"vie": 0.2}})
    assert report.claim_vie_controls(half, cc).verdict == "partly"
    floor = _runs({"gated_t0.25": {"vie": 0.0}, "random_t0.25": {"vie": 0.0}, "words_t0.25": {"vie": 0.0}})
    assert report.claim_vie_controls(floor, cc).verdict == NT
    assert report.claim_vie_controls(_runs({"gated_t0.25": {}}), cc).verdict == NT


def test_vie_vs_original_t1_and_t0(cfg):
    cc = cfg["claims"]
    m = _runs({"original": {"vie": 0.2, "vie_t0": 0.1}, "gated_t0.25": {"vie": 0.1, "vie_t0": 0.2}})
    assert report.claim_vie_original(m, cc, "T1").verdict == HELD
    assert report.claim_vie_original(m, cc, "T0").verdict == NOT_HELD
    assert "−50.0% relative" in report.claim_vie_original(m, cc, "T1").measured.replace("-", "−")
    assert report.claim_vie_original(_runs({"original": {}, "gated_t0.25": {}}, seeds=1), cc, "T1").verdict == NT


def test_consistency(cfg):
    cc = cfg["claims"]
    assert report.claim_consistency(_runs({"original": {"cons": 0.8}, "gated_t0.25": {"cons": 0.9}}), cc).verdict == HELD
    assert report.claim_consistency(_runs({"original": {"cons": 0.9}, "gated_t0.25": {"cons": 0.8}}), cc).verdict == NOT_HELD
    ceil = _runs({"original": {"cons": 0.995}, "gated_t0.25": {"cons": 0.995}})
    assert report.claim_consistency(ceil, cc).verdict == NT


def test_clean_cost(cfg):
    cc, taus = cfg["claims"], cfg["taus"]
    assert report.claim_clean_cost(_runs({"original": {}, "gated_t1": {"clean": 0.9}}), cc, taus).verdict == HELD
    assert report.claim_clean_cost(_runs({"original": {}, "gated_t1": {"clean": 0.7}}), cc, taus).verdict == NOT_HELD
    chance = _runs({"original": {"clean": 0.5}, "gated_t1": {"clean": 0.5}})
    assert report.claim_clean_cost(chance, cc, taus).verdict == NT


def test_sanity(cfg):
    cc = cfg["claims"]
    gate = {"n_valid": 200, "valid_true_uv": 180, "crosstab": [[1, 180, 0, 0], [0, 5, 0, 0], [0, 5, 0, 0], [0, 10, 0, 0]]}
    assert report.claim_sanity(gate, cc).verdict == HELD
    assert report.claim_sanity(dict(gate, valid_true_uv=40), cc).verdict == NOT_HELD
    assert report.claim_sanity(dict(gate, n_valid=10, valid_true_uv=9), cc).verdict == NT
    assert report.claim_sanity({"n_valid": 200}, cc).verdict == NT  # real data: no latent types


def test_summary_writes_every_claim(cfg, tmp_path):
    m = _runs({"original": {}, "gated_t0.25": {}, "random_t0.25": {}, "words_t0.25": {}, "gated_t1": {}})
    m["gate"] = {"n_valid": 50, "valid_true_uv": 40, "crosstab": [[0, 40, 0, 0]] * 4, "delta": 0.1,
                 "means": dict.fromkeys(report.TERMS, 0.1), "raw_means": dict.fromkeys(report.TERMS, 0.0),
                 "shares": dict.fromkeys(report.TERMS, 0.25), "selected": {"0.25": 12},
                 "captioner_acc": {"test": {"colour": 1.0, "shape": 1.0}}}
    report.write(m, cfg, tmp_path / "summary.md", [])
    text = (tmp_path / "summary.md").read_text()
    assert text.count("| **") == 8 and "by construction" in text and "VIE per condition" in text
    assert report.vie_figure(m, tmp_path / "f.png", 0.25).stat().st_size > 1000
