"""Every claim's verdict logic on synthetic per-seed numbers: held, did not hold, not testable (and the
RULE-vs-control cases the old logic got wrong). Thresholds are the schema defaults."""
import pytest

from paperflow.unlearning import claims as C



@pytest.fixture(scope="module")
def cc():
    from pathlib import Path

    from paperflow.core.config import load_config

    return load_config(Path(__file__).resolve().parents[2] / "config" / "config.yaml")["unlearning"]["claims"]


def test_verdict_reference(cc):
    assert C.reference([1, 1, 1], [1, .99, 1], [.99, 1, 1], cc["reference"])[0].outcome == "held"
    assert C.reference([1, 1, 1], [1, 1, 1], [.80, .85, .82], cc["reference"])[0].outcome == "did not hold"
    assert C.reference([1], [1], [1], {**cc["reference"], "min_n": 2})[0].outcome == "not testable at this scale"


def test_verdict_original_leaks(cc):
    assert C.original_leaks([.93, .95, .94], cc["original_leaks"])[0].outcome == "held"
    assert C.original_leaks([.10, .12, .08], cc["original_leaks"])[0].outcome == "did not hold"
    assert C.original_leaks([.9], {**cc["original_leaks"], "min_n": 3})[0].outcome == "not testable at this scale"


def test_verdict_greedy_gap(cc):
    c = cc["greedy_gap"]
    ret_g, ret_l = [.03, .03, .03], [.16, .15, .17]
    # NPO-like: greedy at retrain level, leak@32 far above retrain in every seed
    v, est = C.greedy_gap([.07, .06, .08], ret_g, [.44, .40, .48], ret_l, 0.05, c)
    assert v.outcome == "held" and est.lo > 0.05
    # GradDiff-like: at the retrain floor under sampling too
    assert C.greedy_gap([.04, .05, .03], ret_g, [.12, .11, .13], ret_l, 0.05, c)[0].outcome == "did not hold"
    # greedy does not look forgotten (stopping target missed): premise not met
    v, _ = C.greedy_gap([.50, .40, .45], ret_g, [.90, .90, .90], ret_l, 0.05, c)
    assert v.outcome == "not testable at this scale" and "premise" in v.reason
    # retrain already at the ceiling: nothing can leak more
    assert C.greedy_gap([.05] * 3, ret_g, [1.0] * 3, [.99, .98, 1.0], 0.05, c)[0].outcome == "not testable at this scale"
    assert C.greedy_gap([.05], [.03], [.5], [.1], 0.05, c)[0].outcome == "not testable at this scale"  # 1 seed


def test_verdict_sampling_excess(cc):
    c = cc["sampling_excess"]
    ret_g, ret_l = [.03, .03, .03], [.20, .22, .18]
    assert C.sampling_excess([.07, .06, .08], [.60, .55, .65], ret_g, ret_l, c)[0].outcome == "held"
    # over-forgetting: leak@n below the retrain floor -> the excess is negative: can fail
    assert C.sampling_excess([.01, .0, .01], [.07, .06, .08], ret_g, ret_l, c)[0].outcome == "did not hold"
    # a model that leaks under greedy already: sampling cannot reveal more
    assert C.sampling_excess([1.0] * 3, [1.0] * 3, ret_g, ret_l, c)[0].outcome == "not testable at this scale"
    assert C.sampling_excess([.05, .05], [.6, .6], [.03, .03], [.2, .2], c)[0].outcome == "not testable at this scale"


def test_verdict_rule(cc):
    c = cc["rule"]
    base, ret = [.44, .40, .48], [.16, .15, .17]
    util = [.99, .98, 1.0]
    # RULE clearly below its control and the retrain floor, utility kept
    v, est = C.rule_vs_control([.02, .03, .01], [.20, .22, .18], base, ret, util, c)
    assert v.outcome == "held" and est.lo > 0
    # RULE = control (the old logic printed "held" here): not held
    v, _ = C.rule_vs_control([.05, .10, .07], [.05, .10, .07], base, ret, util, c)
    assert v.outcome in {"did not hold", "inconclusive"} and v.outcome != "held"
    # control better than RULE (the old logic printed "held" here too)
    v, _ = C.rule_vs_control([.10, .12, .11], [.02, .03, .02], base, ret, util, c)
    assert v.outcome == "did not hold"
    # beats the control but destroys utility: partly, never held
    v, _ = C.rule_vs_control([.02, .03, .01], [.20, .22, .18], base, ret, [.5, .6, .55], c)
    assert v.outcome == "partly"
    # a configured utility threshold is used (not a hard-coded 0.9)
    v, _ = C.rule_vs_control([.02, .03, .01], [.20, .22, .18], base, ret, util, {**c, "utility_threshold": 0.995})
    assert v.outcome == "partly" and "0.995" in v.reason
    # a base that never leaks: nothing to remove
    v, _ = C.rule_vs_control([0, 0, 0], [0, 0, 0], [0, 0, 0], ret, util, c)
    assert v.outcome == "not testable at this scale" and "never leaks" in v.reason
    # no control run, or one seed
    assert C.rule_vs_control([.02] * 3, None, base, ret, util, c)[0].outcome == "not testable at this scale"
    assert C.rule_vs_control([.02], [.2], [.4], [.16], [.99], c)[0].outcome == "not testable at this scale"


def test_verdict_not_run():
    assert C.not_run("MUSE code not public").outcome == "not testable at this scale"
