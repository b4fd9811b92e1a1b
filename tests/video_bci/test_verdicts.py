"""Claim logic on synthetic metrics: held / did not hold / not testable for every claim (pytest -k verdict)."""

from __future__ import annotations

import pytest

from paperflow.video_bci.report import LABELS, claims, issue_word
from paperflow.core.stats import Estimate
from paperflow.core.verdict import Verdict

from .conftest import default_section

CLAIMS = ["Integrating hypotheses (f) beats", "DUS raises minority recovery", "DUS costs little",
          "DUS's minority gain is not explained", "PTS raises trace IoU", "PTS learns faster", "(f) DUS + PTS is best"]
KEYS = ("acc", "minority_recovery", "absent_recovery", "majority_retention", "trace_iou", "updates_to_90")


def metrics(vals: dict[str, dict[str, list[float]]], n_minority: int = 300) -> dict:
    """vals[arm][key] = per-seed values (missing keys: the 'default' arm's)."""
    arms = {}
    for arm in LABELS:
        v = {**vals["default"], **vals.get(arm, {})}
        n_seeds = len(v["acc"])
        arms[arm] = {"seeds": {str(s): {**{k: v[k][s] for k in KEYS},
                                        "n": {"all": 1000, "minority": n_minority, "absent": 30,
                                              "majority_right": 670}} for s in range(n_seeds)}}
    return {"arms": arms, "n_test": 1000, "data": {}, "backend": "grpo_lite"}


BASE = {"acc": [0.80, 0.81, 0.79], "minority_recovery": [0.5, 0.52, 0.51], "absent_recovery": [0.0, 0.0, 0.0],
        "majority_retention": [0.95, 0.96, 0.95], "trace_iou": [0.2, 0.21, 0.19], "updates_to_90": [200, 220, 210]}
GOOD = {"default": BASE, "majority": {"acc": [0.68, 0.68, 0.68]},
        "dus": {"minority_recovery": [0.70, 0.72, 0.71], "majority_retention": [0.94, 0.95, 0.95]},
        "pts": {"trace_iou": [0.45, 0.46, 0.44], "updates_to_90": [100, 110, 120]},
        "dus_pts": {"acc": [0.90, 0.91, 0.92]}}
BAD = {"default": BASE, "majority": {"acc": [0.95, 0.95, 0.95]},
       "dus": {"minority_recovery": [0.30, 0.31, 0.29], "majority_retention": [0.70, 0.71, 0.69]},
       "pts": {"trace_iou": [0.10, 0.11, 0.10], "updates_to_90": [300, 320, 310]},
       "dus_pts": {"acc": [0.60, 0.61, 0.62]}}


def verdict(m: dict, prefix: str) -> tuple[str, str]:
    cl = claims(m, default_section())
    assert len(cl) == len(CLAIMS)
    (c,) = [c for c in cl if c.claim.startswith(prefix)]
    return c.verdict, c.measured


@pytest.mark.parametrize("prefix", CLAIMS)
def test_verdict_held(prefix):
    assert verdict(metrics(GOOD), prefix)[0] == "held"


@pytest.mark.parametrize("prefix", [c for c in CLAIMS if "not explained" not in c])
def test_verdict_did_not_hold(prefix):
    v, meas = verdict(metrics(BAD), prefix)
    assert v == "did not hold" and "inverted" in meas


def test_verdict_reweighting_explains_the_gain():
    # (d) beats (c) on minority recovery, but (g) and (h) do just as well: the gain is re-weighting
    same = {"minority_recovery": [0.69, 0.73, 0.71]}
    v, meas = verdict(metrics({**GOOD, "resampled": same, "entropy_weighted": same}), "DUS's minority gain")
    assert v == "inconclusive" and "explained by re-weighting" in meas
    better = {"minority_recovery": [0.80, 0.82, 0.81]}
    v, _ = verdict(metrics({**GOOD, "resampled": better, "entropy_weighted": better}), "DUS's minority gain")
    assert v == "did not hold"
    # no DUS gain at all: nothing to explain
    v, meas = verdict(metrics(BAD), "DUS's minority gain")
    assert v == "not testable at this scale" and "nothing for re-weighting to explain" in meas


@pytest.mark.parametrize("prefix", CLAIMS)
def test_verdict_not_testable_with_one_seed(prefix):
    one = {arm: {k: v[:1] for k, v in d.items()} for arm, d in GOOD.items()}
    assert verdict(metrics(one), prefix)[0] == "not testable at this scale"


def test_verdict_not_testable_with_few_minority_items():
    assert verdict(metrics(GOOD, n_minority=10), "DUS raises minority")[0] == "not testable at this scale"


def test_verdict_issue_words():
    e = Estimate(0.1, -0.05, 0.25, 3)
    assert issue_word(Verdict("inconclusive", ""), e, "greater") == "null"
    assert issue_word(Verdict("did not hold", ""), Estimate(-0.2, -0.3, -0.1, 3), "greater") == "inverted"
    assert issue_word(Verdict("held", ""), e, "greater") == "reproduced"


def test_verdict_item_bootstrap_uses_only_the_subset():
    from paperflow.video_bci.report import item_bootstrap

    mask = [1, 1, 0, 0, 1, 0]
    a = {"0": {"correct": [1, 1, 0, 0, 1, 0]}, "1": {"correct": [1, 0, 0, 0, 1, 0]}}
    b = {"0": {"correct": [0, 0, 1, 1, 0, 1]}, "1": {"correct": [0, 0, 1, 1, 1, 1]}}
    m = {"arms": {"dus": {"seeds": a}, "racc": {"seeds": b}}, "subsets": {"minority": mask}}
    e = item_bootstrap(m, "dus", "racc", "minority", n_boot=200)
    assert e is not None and e.n == 3 and abs(e.value - (3 / 3 + 1 / 3) / 2) < 1e-9
    assert item_bootstrap(m, "dus", "pts", "minority", 200) is None
