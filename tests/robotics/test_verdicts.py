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


# ---------------------------------------------------------------- action-visibility check (issue 16 item 2)
VIS_RULE = load_config("config/config.yaml")["robotics"]["action_check"]


def _vis(nmse: float, ci: tuple[float, float], n_test: int = 600, n_eps: int = 40) -> dict:
    probe = {"nmse": nmse, "ci95": list(ci), "n_episodes": n_eps, "alpha": 10.0, "nmse_pooled": nmse, "nmse_xyz": nmse}
    worse = {**probe, "nmse": 1.0, "ci95": [0.98, 1.02]}
    return {"frame_gap": 2, "n_pairs": {"train": 4000, "test": n_test}, "n_test_episodes": n_eps,
            "probes": {"raw_slot0": probe, "stem_slot0": worse}, "best": "raw_slot0"}


def test_verdict_visibility_held():
    from paperflow.robotics.visibility import invisible, visibility_verdict

    est, v = visibility_verdict(_vis(0.35, (0.30, 0.41)), VIS_RULE)
    assert v.outcome == HELD and est.value == 0.35 and est.n == 40, v.reason
    assert not invisible(_vis(0.35, (0.30, 0.41)), VIS_RULE)


def test_verdict_visibility_did_not_hold_and_invisible():
    from paperflow.robotics.visibility import invisible, visibility_verdict

    vis = _vis(0.97, (0.95, 0.99))
    _, v = visibility_verdict(vis, VIS_RULE)
    assert v.outcome == NOT_HELD, v.reason
    assert invisible(vis, VIS_RULE)  # within margin of chance: the summary says no LAM can carry it
    _, v2 = visibility_verdict(_vis(0.88, (0.85, 0.91)), VIS_RULE)
    assert v2.outcome == NOT_HELD and not invisible(_vis(0.88, (0.85, 0.91)), VIS_RULE)


def test_verdict_visibility_not_testable():
    from paperflow.robotics.visibility import visibility_verdict

    _, v = visibility_verdict(_vis(0.35, (0.30, 0.41), n_test=30), VIS_RULE)  # too few test pairs
    assert v.outcome == NOT_TESTABLE and "test pairs" in v.reason
    _, v = visibility_verdict(_vis(0.35, (0.30, 0.41), n_eps=3), VIS_RULE)  # too few test episodes
    assert v.outcome == NOT_TESTABLE
    _, v = visibility_verdict({"frame_gap": 2, "n_pairs": {"train": 0, "test": 0}, "n_test_episodes": 0,
                               "probes": {}, "best": None}, VIS_RULE)
    assert v.outcome == NOT_TESTABLE


def test_visibility_summary_section_says_no_lam_can():
    from paperflow.robotics.report import visibility_section

    claim, text = visibility_section(_vis(0.97, (0.95, 0.99)), VIS_RULE)
    assert claim.verdict == NOT_HELD and "cannot predict the action" in text and "raw_slot0" in text
    claim, text = visibility_section(_vis(0.35, (0.30, 0.41)), VIS_RULE)
    assert claim.verdict == HELD and "cannot predict" not in text
