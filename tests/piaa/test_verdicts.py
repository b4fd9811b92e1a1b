"""Claim logic of the piaa summary on synthetic metrics: every claim gets "held", "did not hold" and
"not testable" cases. Thresholds are the schema defaults (piaa.claims.*)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from paperflow.core.config import validate_config
from paperflow.piaa import report

HELD, NOT_HELD, NT = "held", "did not hold", "not testable at this scale"
ARMS = ("a1_cls", "a2_patch_van", "a3_patch_sclip", "a4_text", "a4_pvcl", "a5_piaa")


@pytest.fixture(scope="module")
def cfg():
    return validate_config({"piaa": {"enabled": False}})["piaa"]


def metrics(maps: dict[str, float], *, seeds: int = 3, chance: float = 0.2, gap: float = 0.8, excess: float = 0.2,
            small: dict[str, float] | None = None, large: dict[str, float] | None = None) -> dict:
    """Per-seed mAPs = value + a small deterministic spread (shared across arms: paired differences are
    exactly the value differences, plus a tiny seed-dependent term so a CI exists)."""
    spread = np.linspace(-0.01, 0.01, seeds)
    jitter = np.linspace(-0.001, 0.001, seeds)
    arms = {}
    for k, v in maps.items():
        j = jitter * (1 + ARMS.index(k)) if k in ARMS else jitter
        row = {"map": list(v + spread + j)}
        if small is not None:
            row["map_by_tercile"] = {"small": list(small.get(k, v) + spread + j), "medium": list(v + spread),
                                     "large": list((large or {}).get(k, v) + spread - j)}
        arms[k] = row
    return {"seeds": list(range(seeds)), "n_test": 1000, "chance_map": [chance] * seeds, "arms": arms,
            "diagnostics": {"gap_patch_sclip": [gap] * seeds,
                            "entanglement_van": [{"excess": excess, "index": 0.5}] * seeds}}


BASE = {"a1_cls": 0.5, "a2_patch_van": 0.55, "a3_patch_sclip": 0.6, "a4_text": 0.6, "a4_pvcl": 0.65, "a5_piaa": 0.7}


def test_verdict_piaa_vs_cls(cfg):
    assert report.claim_piaa_vs_cls(metrics(BASE), cfg).verdict == HELD
    worse = dict(BASE, a5_piaa=0.4)
    assert report.claim_piaa_vs_cls(metrics(worse), cfg).verdict == NOT_HELD
    at_chance = dict(BASE, a1_cls=0.2)
    c = report.claim_piaa_vs_cls(metrics(at_chance, chance=0.2), cfg)
    assert c.verdict == NT and "chance" in c.reason
    assert report.claim_piaa_vs_cls(metrics(BASE, seeds=2), cfg).verdict == NT


def test_verdict_pvcl_vs_text(cfg):
    assert report.claim_pvcl_vs_text(metrics(BASE), cfg).verdict == HELD
    assert report.claim_pvcl_vs_text(metrics(dict(BASE, a4_pvcl=0.5)), cfg).verdict == NOT_HELD
    c = report.claim_pvcl_vs_text(metrics(BASE, gap=0.01), cfg)
    assert c.verdict == NT and "no modality gap" in c.reason


def test_verdict_fusion(cfg):
    assert report.claim_fusion(metrics(BASE), cfg).verdict == HELD
    assert report.claim_fusion(metrics(dict(BASE, a5_piaa=0.55)), cfg).verdict == NOT_HELD
    assert report.claim_fusion(metrics(BASE, seeds=1), cfg).verdict == NT


def test_verdict_disentangle(cfg):
    assert report.claim_disentangle(metrics(BASE), cfg).verdict == HELD
    assert report.claim_disentangle(metrics(dict(BASE, a3_patch_sclip=0.5)), cfg).verdict == NOT_HELD
    c = report.claim_disentangle(metrics(BASE, excess=0.0), cfg)
    assert c.verdict == NT and "no entanglement to remove at this scale" in c.reason


def test_verdict_small_objects(cfg):
    small = {"a1_cls": 0.3, "a5_piaa": 0.6}
    large = {"a1_cls": 0.7, "a5_piaa": 0.72}
    assert report.claim_small_objects(metrics(BASE, small=small, large=large), cfg).verdict == HELD
    assert report.claim_small_objects(metrics(BASE, small=large, large=small), cfg).verdict == NOT_HELD
    c = report.claim_small_objects(metrics(BASE), cfg)  # no terciles (real list data without areas)
    assert c.verdict == NT


def test_verdict_inconclusive_when_ci_covers_threshold(cfg):
    m = metrics(BASE)
    m = copy.deepcopy(m)
    m["arms"]["a5_piaa"]["map"] = [0.45, 0.56, 0.52]  # differences -0.05, +0.06, +0.02 around 0
    m["arms"]["a1_cls"]["map"] = [0.5, 0.5, 0.5]
    assert report.claim_piaa_vs_cls(m, cfg).verdict == "inconclusive"
