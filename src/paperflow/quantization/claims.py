"""The study's claims as pure functions: measured numbers in, `core.verdict.Verdict` out. Thresholds,
margins and minimum samples come from the config (`quantization.claims.<claim>`), never from here.

Perplexity claims ("A beats B"): effect = mean paired difference of per-window test NLL, B − A (nats,
the log of the PPL ratio), over every (calibration seed, test window) pair both runs have; CI = a
percentile bootstrap over those pairs (`core.stats.bootstrap_ci`), n = pairs. With one seed the CI
covers test-window sampling only, not calibration-seed spread (the summary says so).

Cross-study claims (unlearning checkpoints after weight-only quantization): effect = paired per-prompt
difference of leak@k, quantized − FP, over (unlearning seed, forget prompt) pairs; bootstrap CI; n = pairs.
- "RTN-W8 leaves leak@k unchanged" is an equivalence claim: held only when the whole CI lies inside
  ±margin; a model that never leaked (FP and quantized leak@k both within `floor` of 0) is not testable.
- "RTN-W4 brings forgotten knowledge back": held when the CI lies above `threshold`; not testable when
  the quantized original does not leak (nothing can come back) or the FP model already leaks at ceiling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from paperflow.core.stats import Estimate, bootstrap_ci
from paperflow.core.verdict import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, Thresholds, Verdict, judge


def estimate(pairs: Sequence[float]) -> Estimate:
    """Mean of paired differences with a bootstrap CI (no CI below 2 pairs)."""
    if not pairs:
        return Estimate(float("nan"), n=0)
    return bootstrap_ci(list(pairs), seed=0)


# ---------------------------------------------------------------- perplexity
def window_pairs(windows_a: Mapping[int, Sequence[float]], windows_b: Mapping[int, Sequence[float]]) -> list[float]:
    """B − A per (seed, test window), over the seeds both runs have ({seed: per-window NLL})."""
    out = []
    for seed in sorted(set(windows_a) & set(windows_b)):
        a, b = windows_a[seed], windows_b[seed]
        if len(a) != len(b):
            raise ValueError(f"seed {seed}: {len(a)} vs {len(b)} test windows: not the same test set")
        out += [y - x for x, y in zip(a, b)]
    return out


def beats(windows_a: Mapping[int, Sequence[float]], windows_b: Mapping[int, Sequence[float]],
          rule: Mapping[str, Any], what: str = "Δ NLL") -> tuple[Estimate, Verdict]:
    """"A has lower test perplexity than B": the CI of the paired NLL difference B − A beyond the threshold."""
    est = estimate(window_pairs(windows_a, windows_b))
    return est, judge(est, Thresholds.from_config(rule), what=what)


def paper_ratio(source: str) -> Verdict:
    """The paper's PPL ratios to FP (LLaMA-2-7B on WikiText-2) apply to that model only."""
    why = {"smollm2": "measured on SmolLM2-135M (dequantized Q4_1) with the stdlib corpus, not LLaMA-2-7B on WikiText-2",
           "tiny": "measured on a tiny pipeline-trained Llama (test tier), not LLaMA-2-7B on WikiText-2"}
    return judge(Estimate(float("nan")), Thresholds(), untestable=why.get(
        source, "the ratio is the paper's for LLaMA-2-7B on WikiText-2; the acceptance check against 6.97 / 8.31 "
                "is by hand for a local checkpoint (its identity is not known to the pipeline)"))


# ---------------------------------------------------------------- KOTMS invariants
def kotms_invariants(max_orth_err: float, loss_first: float, loss_last: float, n_linears: int,
                     orth_rule: Mapping[str, Any], loss_rule: Mapping[str, Any]) -> Verdict:
    """Factors orthogonal (max |CᵀC − I| below the threshold) and the mean tri-modal loss not increasing."""
    orth = judge(Estimate(max_orth_err, n=n_linears), Thresholds.from_config(orth_rule), what="max |CᵀC − I|")
    loss = judge(Estimate(loss_last - loss_first, n=n_linears), Thresholds.from_config(loss_rule),
                 what="mean loss last − first")
    outs = [orth.outcome, loss.outcome]
    reason = f"{orth.reason}; {loss.reason}"
    if all(o == HELD for o in outs):
        return Verdict(HELD, reason)
    if NOT_TESTABLE in outs:
        return Verdict(NOT_TESTABLE, reason)
    return Verdict(NOT_HELD, reason)


# ---------------------------------------------------------------- cross-study
def equivalent(est: Estimate, margin: float, min_n: int, what: str) -> Verdict:
    """Two one-sided decisions: held when the whole CI lies inside (−margin, +margin); did not hold when it
    lies entirely beyond one side; inconclusive otherwise."""
    lower = judge(est, Thresholds(-margin, "greater", min_n), what=what)
    upper = judge(est, Thresholds(margin, "less", min_n), what=what)
    if lower.outcome == NOT_TESTABLE:
        return lower
    if lower.outcome == HELD and upper.outcome == HELD:
        ci = f", CI [{est.lo:.4g}, {est.hi:.4g}]" if est.has_ci else " (no CI)"
        return Verdict(HELD, f"{what} {est.value:.4g}{ci} inside ±{margin:g} (n = {est.n})")
    for side in (lower, upper):
        if side.outcome == NOT_HELD:
            return Verdict(NOT_HELD, side.reason)
    return Verdict(INCONCLUSIVE, f"{upper.reason}; {lower.reason}")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def w8_unchanged(delta_pairs: Sequence[float], leak_fp: Sequence[float], leak_q: Sequence[float],
                 rule: Mapping[str, Any]) -> tuple[Estimate, Verdict]:
    """RTN-W8 leaves an unlearned model's leak@k unchanged (equivalence within ±margin)."""
    est = estimate(delta_pairs)
    floor = float(rule["floor"])
    fp, q = _mean(leak_fp), _mean(leak_q)
    if fp <= floor and q <= floor:
        return est, judge(est, Thresholds(min_n=int(rule["min_n"])), untestable=(
            f"the model never leaked (leak@k {fp:.3f} → {q:.3f}, both ≤ floor {floor:g}): an unchanged zero shows "
            "nothing"))
    return est, equivalent(est, float(rule["margin"]), int(rule["min_n"]), "Δ leak@k")


def w4_recovers(delta_pairs: Sequence[float], leak_fp: Sequence[float], leak_q0: Sequence[float] | None,
                rule: Mapping[str, Any]) -> tuple[Estimate, Verdict]:
    """RTN-W4 brings forgotten knowledge back: Δ leak@k above the threshold."""
    est = estimate(delta_pairs)
    floor = float(rule["floor"])
    reason = None
    if leak_q0 is None:
        reason = "needs the quantized original model (add `full` to quantization.cross_unlearning.models)"
    elif _mean(leak_q0) <= floor:
        reason = (f"the quantized original leaks {_mean(leak_q0):.3f} ≤ floor {floor:g}: no knowledge to come back")
    elif _mean(leak_fp) >= 1.0 - floor:
        reason = f"the unlearned model already leaks {_mean(leak_fp):.3f} (at ceiling): leak@k cannot rise"
    return est, judge(est, Thresholds.from_config(rule), untestable=reason, what="Δ leak@k")
