"""The one verdict helper: a claim's verdict from a measured effect, its uncertainty, the sample size
and thresholds declared in the config (never in report code).

Outcomes, in the order they are checked:
1. "not testable at this scale" — the sample is below the declared minimum, the baseline/control is at
   floor or chance (nothing to improve on or to lose), or the fit/measurement is degenerate;
2. "held" — the whole CI lies beyond the decision threshold in the claimed direction (with no CI: the
   point estimate does, and the reason says there is no CI);
3. "did not hold" — the whole CI lies on the other side (or at the threshold);
4. "inconclusive" — the CI covers the threshold.
`combine` turns sub-verdicts into one ("partly" when some held and some did not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from paperflow.core.stats import Estimate

Outcome = Literal["held", "did not hold", "partly", "not testable at this scale", "inconclusive"]
HELD: Outcome = "held"
NOT_HELD: Outcome = "did not hold"
PARTLY: Outcome = "partly"
NOT_TESTABLE: Outcome = "not testable at this scale"
INCONCLUSIVE: Outcome = "inconclusive"
OUTCOMES: tuple[Outcome, ...] = (HELD, NOT_HELD, PARTLY, NOT_TESTABLE, INCONCLUSIVE)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str

    def __str__(self) -> str:
        return self.outcome


@dataclass(frozen=True)
class Thresholds:
    """A claim's pre-declared decision rule (read from `<study>.claims.<claim>` in the config).

    threshold: the effect must exceed it (direction "greater") or fall below it ("less");
    min_n: the smallest sample (seeds, episodes, pairs — whatever `Estimate.n` counts) that can decide.
    """

    threshold: float = 0.0
    direction: Literal["greater", "less"] = "greater"
    min_n: int = 3

    @classmethod
    def from_config(cls, cfg: Mapping[str, object]) -> "Thresholds":
        return cls(threshold=float(cfg.get("threshold", 0.0)),  # type: ignore[arg-type]
                   direction=str(cfg.get("direction", "greater")),  # type: ignore[arg-type]
                   min_n=int(cfg.get("min_n", 3)))  # type: ignore[call-overload]


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def judge(effect: Estimate, rule: Thresholds, *, untestable: str | None = None, what: str = "effect") -> Verdict:
    """Decide one claim. `untestable` (a reason, e.g. 'baseline at chance: mAP 0.50 = random codes')
    forces "not testable at this scale"; so does `effect.n < rule.min_n`."""
    if untestable:
        return Verdict(NOT_TESTABLE, untestable)
    if effect.n < rule.min_n:
        return Verdict(NOT_TESTABLE, f"sample n = {effect.n} below the declared minimum {rule.min_n}")
    if effect.value != effect.value:  # NaN
        return Verdict(NOT_TESTABLE, f"{what} is undefined (NaN)")
    thr = rule.threshold
    sign = 1.0 if rule.direction == "greater" else -1.0
    cmp = ">" if sign > 0 else "<"
    if effect.has_ci:
        lo, hi = (effect.lo, effect.hi) if sign > 0 else (-effect.hi, -effect.lo)  # type: ignore[operator]
        t = sign * thr
        ci = f"[{_fmt(effect.lo)}, {_fmt(effect.hi)}]"  # type: ignore[arg-type]
        if lo > t:
            return Verdict(HELD, f"{what} {_fmt(effect.value)}, CI {ci} entirely {cmp} {_fmt(thr)} (n = {effect.n})")
        if hi <= t:
            return Verdict(NOT_HELD, f"{what} {_fmt(effect.value)}, CI {ci} not {cmp} {_fmt(thr)} (n = {effect.n})")
        return Verdict(INCONCLUSIVE, f"{what} {_fmt(effect.value)}, CI {ci} covers {_fmt(thr)} (n = {effect.n})")
    if sign * effect.value > sign * thr:
        return Verdict(HELD, f"{what} {_fmt(effect.value)} {cmp} {_fmt(thr)} (n = {effect.n}, no CI)")
    return Verdict(NOT_HELD, f"{what} {_fmt(effect.value)} not {cmp} {_fmt(thr)} (n = {effect.n}, no CI)")


def at_floor(value: float, floor: float, margin: float) -> bool:
    """True when `value` is within `margin` of the floor/chance level `floor` (nothing to compare)."""
    return abs(value - floor) <= margin


def combine(parts: Sequence[Verdict], label: str = "") -> Verdict:
    """One verdict from sub-verdicts: all held → held; some held (or partly) → partly; none held and
    some did not hold → did not hold; otherwise not testable (if any part is) or inconclusive."""
    if not parts:
        return Verdict(NOT_TESTABLE, "no sub-claim could be measured")
    outs = [p.outcome for p in parts]
    reason = "; ".join(dict.fromkeys(p.reason for p in parts))  # identical reasons once, in order
    if label:
        reason = f"{label}: {reason}"
    if all(o == HELD for o in outs):
        return Verdict(HELD, reason)
    if HELD in outs or PARTLY in outs:
        return Verdict(PARTLY, reason)
    if NOT_HELD in outs:
        return Verdict(NOT_HELD, reason)
    return Verdict(NOT_TESTABLE if NOT_TESTABLE in outs else INCONCLUSIVE, reason)
