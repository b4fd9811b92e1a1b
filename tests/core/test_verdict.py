"""The shared verdict helper: one case per outcome and per rule that forces 'not testable'."""

from __future__ import annotations

import pytest

from paperflow.core.stats import Estimate, paired_diff
from paperflow.core.verdict import (HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, PARTLY, Thresholds, Verdict,
                                    at_floor, combine, judge)

RULE = Thresholds(threshold=0.0, direction="greater", min_n=3)


def test_verdict_held_when_ci_entirely_above_threshold():
    v = judge(Estimate(0.5, 0.2, 0.8, n=3), RULE, what="gain")
    assert v.outcome == HELD and "gain" in v.reason and "n = 3" in v.reason


def test_verdict_not_held_when_ci_below_or_at_threshold():
    assert judge(Estimate(-0.5, -0.8, -0.2, n=3), RULE).outcome == NOT_HELD
    assert judge(Estimate(-0.1, -0.2, 0.0, n=3), RULE).outcome == NOT_HELD


def test_verdict_inconclusive_when_ci_covers_threshold():
    assert judge(Estimate(0.1, -0.2, 0.4, n=5), RULE).outcome == INCONCLUSIVE


def test_verdict_not_testable_below_min_n_even_with_a_large_effect():
    v = judge(Estimate(10.0, 9.0, 11.0, n=2), RULE)
    assert v.outcome == NOT_TESTABLE and "minimum 3" in v.reason


def test_verdict_not_testable_when_baseline_at_chance_overrides_everything():
    v = judge(Estimate(0.5, 0.4, 0.6, n=10), RULE, untestable="baseline at chance (0.50)")
    assert v == Verdict(NOT_TESTABLE, "baseline at chance (0.50)")


def test_verdict_direction_less():
    rule = Thresholds(threshold=0.1, direction="less", min_n=3)
    assert judge(Estimate(0.05, 0.0, 0.08, n=3), rule).outcome == HELD
    assert judge(Estimate(0.3, 0.2, 0.4, n=3), rule).outcome == NOT_HELD
    assert judge(Estimate(0.1, 0.05, 0.15, n=3), rule).outcome == INCONCLUSIVE


def test_verdict_equal_to_control_never_holds():
    """Method = control (zero difference on every seed) must not be 'held' for a 'beats control' claim."""
    d = paired_diff([0.5, 0.6, 0.7], [0.5, 0.6, 0.7])
    assert judge(d, RULE).outcome == NOT_HELD


def test_verdict_point_estimate_without_ci_says_so():
    rule = Thresholds(0.0, "greater", min_n=1)
    v = judge(Estimate(0.3, n=1), rule)
    assert v.outcome == HELD and "no CI" in v.reason
    assert judge(Estimate(0.0, n=1), rule).outcome == NOT_HELD


def test_verdict_nan_is_not_testable():
    assert judge(Estimate(float("nan"), n=5), RULE).outcome == NOT_TESTABLE


def test_verdict_thresholds_from_config():
    r = Thresholds.from_config({"threshold": 0.05, "direction": "less", "min_n": 5})
    assert r == Thresholds(0.05, "less", 5)
    assert Thresholds.from_config({}) == Thresholds()


@pytest.mark.parametrize("outs,expected", [
    ([HELD, HELD], HELD),
    ([HELD, NOT_HELD], PARTLY),
    ([HELD, NOT_TESTABLE], PARTLY),
    ([NOT_HELD, NOT_TESTABLE], NOT_HELD),
    ([NOT_TESTABLE, INCONCLUSIVE], NOT_TESTABLE),
    ([INCONCLUSIVE], INCONCLUSIVE),
    ([], NOT_TESTABLE),
])
def test_verdict_combine(outs, expected):
    assert combine([Verdict(o, o) for o in outs]).outcome == expected


def test_verdict_at_floor():
    assert at_floor(0.01, 0.0, 0.02) and not at_floor(0.1, 0.0, 0.02)
