"""MVP-LAM claim logic on synthetic metrics: held / did not hold / not testable for every claim."""

from __future__ import annotations

import pytest

from paperflow.core.config import load_config
from paperflow.core.verdict import HELD, NOT_HELD, NOT_TESTABLE
from paperflow.robotics.claims import CLAIMS, judge_all, judge_claim

CFG = load_config("config/config.yaml")["robotics"]["claims"]  # schema defaults for the rules
# per claim: (a clearly good MVP, the single-view control) in the claim's direction, off chance level
GOOD = {"ksg": ([0.9, 1.0, 1.1], [0.40, 0.45, 0.50]), "ba": ([0.9, 1.0, 1.1], [0.40, 0.45, 0.50]),
        "probe_nmse": ([0.50, 0.52, 0.55], [0.80, 0.82, 0.84]), "ood_nmse": ([0.50, 0.52, 0.55], [0.80, 0.82, 0.84])}
CHANCE = {"ksg": [0.01, 0.0, 0.02], "ba": [0.0, 0.01, 0.0], "probe_nmse": [0.99, 1.0, 1.01], "ood_nmse": [1.0, 0.98, 1.02]}


@pytest.mark.parametrize("key", list(CLAIMS))
def test_verdict_held(key):
    mvp, single = GOOD[key]
    _, v = judge_claim(key, mvp, single, 500, CFG[key])
    assert v.outcome == HELD, v.reason


@pytest.mark.parametrize("key", list(CLAIMS))
def test_verdict_did_not_hold(key):
    mvp, single = GOOD[key]
    _, v = judge_claim(key, single, mvp, 500, CFG[key])  # swapped: the control is the better one
    assert v.outcome == NOT_HELD, v.reason


@pytest.mark.parametrize("key", list(CLAIMS))
def test_verdict_not_testable_small_sample(key):
    mvp, single = GOOD[key]
    _, v = judge_claim(key, mvp, single, 20, CFG[key])  # 20 test pairs (the old smoke profile)
    assert v.outcome == NOT_TESTABLE and "test pairs" in v.reason
    _, v = judge_claim(key, mvp[:1], single[:1], 500, CFG[key])  # one seed
    assert v.outcome == NOT_TESTABLE and "minimum" in v.reason


@pytest.mark.parametrize("key", list(CLAIMS))
def test_verdict_not_testable_baseline_at_chance(key):
    mvp, _ = GOOD[key]
    _, v = judge_claim(key, mvp, CHANCE[key], 500, CFG[key])  # MVP far better, but the baseline is at chance
    assert v.outcome == NOT_TESTABLE and "chance" in v.reason


def test_verdict_judge_all_reads_the_aggregate():
    def model(i):
        return {"seeds": [0, 1, 2], "n_test_pairs": 300,
                **{m: {"per_seed": GOOD[k][i]} for k, (m, *_r) in CLAIMS.items()}}

    out = judge_all({"mvp": model(0), "single": model(1)}, CFG)
    assert [j.key for j in out] == list(CLAIMS) and all(j.verdict.outcome == HELD for j in out)
    assert all(j.sample == "3 seeds × 300 test pairs" for j in out)
    assert judge_all({"mvp": model(0)}, CFG) == []
