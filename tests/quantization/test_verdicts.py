"""Claim logic on synthetic numbers: every claim has a held, a did-not-hold and a not-testable case.
Rules are the schema's declared defaults (read from the validated config), not numbers of this file."""

import pytest

from paperflow.core.config import load_config
from paperflow.core.verdict import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE
from paperflow.quantization import claims as C


@pytest.fixture(scope="module")
def rules():
    return load_config("config/config.yaml")["quantization"]["claims"]


def _win(*per_seed):
    """{seed: per-window NLL}"""
    return {s: list(w) for s, w in enumerate(per_seed)}


A = [3.0, 3.2, 2.9, 3.1, 3.05, 2.95, 3.3, 3.0]  # a run's per-window NLL (8 windows)


# ---------------------------------------------------------------- perplexity claims ("A beats B")
@pytest.mark.parametrize("key", ["twla_beats_rtn_ternary_a16", "fp_beats_twla_a16", "twla_beats_rtn_ternary_a4",
                                 "twla_beats_rot_random_a4", "twla_beats_rot_kotms_a4", "gptq_beats_stage1",
                                 "gptq_beats_no_feedback", "a4mp_beats_a4lac"])
def test_verdict_ppl_claims_held_not_held_not_testable(rules, key):
    rule = rules[key]
    better = [x + 0.5 + 0.01 * i for i, x in enumerate(A)]  # B worse on every window
    est, v = C.beats(_win(A), _win(better), rule)
    assert v.outcome == HELD and est.n == 8 and est.lo > 0
    est, v = C.beats(_win(better), _win(A), rule)  # the claimed winner is worse
    assert v.outcome == NOT_HELD
    est, v = C.beats(_win(A[:3]), _win(better[:3]), rule)  # 3 windows < min_n
    assert v.outcome == NOT_TESTABLE and "below the declared minimum" in v.reason


def test_verdict_ppl_inconclusive_and_seeds_are_pooled(rules):
    rule = rules["twla_beats_rtn_ternary_a16"]
    noisy = [x + d for x, d in zip(A, [0.3, -0.3, 0.25, -0.2, 0.3, -0.35, 0.2, -0.2])]
    assert C.beats(_win(A), _win(noisy), rule)[1].outcome == INCONCLUSIVE
    # two seeds, 4 windows each: 8 pairs reach min_n; only seeds both runs have count
    est, v = C.beats(_win(A[:4], A[4:]), {**_win([x + 1 for x in A[:4]], [x + 1 for x in A[4:]]), 7: [0.0] * 4}, rule)
    assert est.n == 8 and v.outcome == HELD
    with pytest.raises(ValueError, match="not the same test set"):
        C.window_pairs(_win(A), _win(A[:4]))


def test_verdict_threshold_comes_from_the_rule(rules):
    rule = dict(rules["twla_beats_rtn_ternary_a16"], threshold=1.0)  # demand a PPL ratio > e
    est, v = C.beats(_win(A), _win([x + 0.5 for x in A]), rule)
    assert v.outcome == NOT_HELD and est.value == pytest.approx(0.5)


def test_verdict_paper_ratio_not_testable_off_llama():
    for src in ("smollm2", "tiny", "path"):
        assert C.paper_ratio(src).outcome == NOT_TESTABLE


# ---------------------------------------------------------------- KOTMS invariants
def test_verdict_kotms_invariants(rules):
    o, lo = rules["kotms_orthogonal"], rules["kotms_loss_decreases"]
    assert C.kotms_invariants(3e-7, 2.3, 1.5, 14, o, lo).outcome == HELD
    assert C.kotms_invariants(3e-3, 2.3, 1.5, 14, o, lo).outcome == NOT_HELD  # not orthogonal
    assert C.kotms_invariants(3e-7, 1.5, 2.3, 14, o, lo).outcome == NOT_HELD  # loss went up
    assert C.kotms_invariants(0.0, 0.0, 0.0, 0, o, lo).outcome == NOT_TESTABLE  # no linear measured


# ---------------------------------------------------------------- cross-study: RTN-W8 leaves leak@k unchanged
def test_verdict_w8_unchanged(rules):
    rule = rules["ul_w8_unchanged"]
    same = [0.0] * 30 + [0.01, -0.01] * 5  # 40 (seed, prompt) pairs, tiny changes
    est, v = C.w8_unchanged(same, [0.475], [0.475], rule)
    assert v.outcome == HELD and est.lo > -rule["margin"] and est.hi < rule["margin"]
    up = [0.3] * 20 + [0.2] * 20
    assert C.w8_unchanged(up, [0.4], [0.65], rule)[1].outcome == NOT_HELD
    half = [0.0] * 36 + [1.0] * 4  # 10 % of prompts flipped: the CI straddles the margin
    assert C.w8_unchanged(half, [0.4], [0.5], rule)[1].outcome == INCONCLUSIVE


def test_verdict_w8_never_leaked_is_not_testable(rules):
    """0.000 → 0.000 is no evidence that W8 keeps anything unchanged."""
    est, v = C.w8_unchanged([0.0] * 40, [0.0], [0.0], rules["ul_w8_unchanged"])
    assert v.outcome == NOT_TESTABLE and "never leaked" in v.reason
    assert C.w8_unchanged([0.0] * 4, [0.5], [0.5], rules["ul_w8_unchanged"])[1].outcome == NOT_TESTABLE  # n < min_n


# ---------------------------------------------------------------- cross-study: RTN-W4 brings knowledge back
def test_verdict_w4_recovers(rules):
    rule = rules["ul_w4_recovers"]
    est, v = C.w4_recovers([0.25] * 20 + [0.15] * 20, [0.3], [0.9], rule)
    assert v.outcome == HELD and est.lo > rule["threshold"]
    assert C.w4_recovers([0.0] * 20 + [0.01] * 20, [0.3], [0.9], rule)[1].outcome == NOT_HELD  # +0.005
    assert C.w4_recovers([0.0] * 30 + [0.5] * 10, [0.3], [0.9], rule)[1].outcome in (INCONCLUSIVE, HELD)


def test_verdict_w4_not_testable(rules):
    rule = rules["ul_w4_recovers"]
    big = [0.5] * 40
    v = C.w4_recovers(big, [0.3], [0.0], rule)[1]  # the quantized original leaks nothing
    assert v.outcome == NOT_TESTABLE and "no knowledge to come back" in v.reason
    assert C.w4_recovers(big, [0.3], None, rule)[1].outcome == NOT_TESTABLE  # no quantized original measured
    assert C.w4_recovers([0.0] * 40, [1.0], [1.0], rule)[1].outcome == NOT_TESTABLE  # at ceiling
    assert C.w4_recovers(big[:5], [0.3], [0.9], rule)[1].outcome == NOT_TESTABLE  # n < min_n
