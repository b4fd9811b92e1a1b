"""r_acc, DUS, PTS, the entropy-weighted control: the formulas of the spec (our formalisation)."""

from __future__ import annotations

import numpy as np

from paperflow.video_bci.rewards import dus, jaccard, pts, utility


def _p(counts):
    c = np.asarray(counts, float)
    return c / c.sum()


def test_dus_pays_for_correct_minority_under_conflict():
    p = _p([5, 3, 0, 0, 0])
    H = -(p[p > 0] * np.log(p[p > 0])).sum() / np.log(5)
    assert np.isclose(dus(1, 1, p, H, 0), H * (1 - 3 / 8))  # correct minority answer
    assert dus(0, 1, p, H, 0) == 0.0  # wrong: nothing
    assert dus(1, 1, p, H, 0) > dus(0, 0, p, H, 0)  # the majority answer, when right, earns less
    assert dus(0, 0, _p([8, 0, 0, 0, 0]), 0.0, 0) == 0.0  # consensus: Ĥ = 0
    assert np.isclose(dus(2, 2, p, H, 0), H)  # y in no prior: p̂(a*) = 0, the bonus is Ĥ
    assert np.isclose(dus(1, 1, p, H, 0, mode="bonus"), H * (1 - 3 / 8) + 1)
    assert np.isclose(dus(0, 0, p, H, 0, mode="bonus"), H * (1 - 5 / 8))


def test_pts_is_the_jaccard_margin_and_zero_without_both_sets():
    T = 8
    tr_c = np.zeros(T); tr_c[[0, 1, 2]] = 1
    tr_w = np.zeros(T); tr_w[[5, 6, 7]] = 1
    pa = np.array([0, 1])
    pt = np.stack([tr_c, tr_w])
    assert np.isclose(pts(0, tr_c, 0, pa, pt), 1.0)
    assert np.isclose(pts(0, tr_w, 0, pa, pt), -1.0)
    assert pts(1, tr_c, 0, pa, pt) == 1.0  # ungated: paid even for a wrong answer
    assert pts(1, tr_c, 0, pa, pt, gate="correct") == 0.0
    assert pts(0, tr_c, 0, np.array([0, 0]), pt) == 0.0  # no wrong prior
    assert pts(0, tr_c, 3, pa, pt) == 0.0  # no correct prior
    assert jaccard(np.zeros(T), np.zeros(T)) == 1.0


def test_utility_per_arm():
    T = 8
    item = {"y": np.array([1]), "p_hat": _p([5, 3, 0, 0, 0])[None], "H_hat": np.array([0.5]),
            "majority": np.array([0]), "prior_ans": np.array([[1, 0]]),
            "prior_trace": np.stack([np.eye(T)[0], np.eye(T)[7]])[None]}
    ans = np.array([[1, 0]])
    trace = np.stack([np.eye(T)[0], np.eye(T)[0]])[None]
    cfg = {"lambda_dus": 0.5, "lambda_pts": 0.5, "dus_mode": "product", "pts_gate": "none"}
    u = {arm: utility(arm, ans, trace, item, cfg)[0] for arm in ("racc", "dus", "pts", "dus_pts", "entropy_weighted")}
    assert u["racc"].tolist() == [1.0, 0.0]
    assert np.isclose(u["entropy_weighted"][0], 1.25) and u["entropy_weighted"][1] == 0
    assert np.isclose(u["dus"][0], 1 + 0.5 * 0.5 * (1 - 3 / 8)) and u["dus"][1] == 0
    assert np.isclose(u["pts"][0], 1.5) and np.isclose(u["pts"][1], 0.5)
    assert np.isclose(u["dus_pts"][0], u["dus"][0] + 0.5)
