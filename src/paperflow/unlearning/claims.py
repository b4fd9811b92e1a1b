"""The study's claims as pure functions: per-seed numbers in, a `core.verdict.Verdict` out.

Every function takes plain per-seed lists (position i = seed i, the same seeds for every model, so
differences are paired) and the claim's thresholds from `unlearning.claims.<claim>` (schema defaults);
`report.py` feeds them from the judged metrics and `tests/unlearning/test_verdicts.py` from synthetic
numbers. No threshold lives here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.core.stats import Estimate, paired_diff, t_ci
from paperflow.core.verdict import HELD, NOT_HELD, NOT_TESTABLE, Thresholds, Verdict, combine, judge

NAN = Estimate(float("nan"))


def _thr(cfg: Mapping[str, Any]) -> Thresholds:
    return Thresholds.from_config(cfg)


def reference(full_forget: Sequence[float], full_retain: Sequence[float], retrain_retain: Sequence[float],
              cfg: Mapping[str, Any]) -> tuple[Verdict, Estimate]:
    """The reference models reproduce their training facts: the smallest of the three greedy accuracies,
    per seed, must exceed `threshold` (CI across seeds)."""
    per_seed = [min(a, b, c) for a, b, c in zip(full_forget, full_retain, retrain_retain)]
    est = t_ci(per_seed)
    return judge(est, _thr(cfg), what="min greedy accuracy"), est


def original_leaks(full_leak1: Sequence[float], cfg: Mapping[str, Any]) -> tuple[Verdict, Estimate]:
    """The original (full) model leaks the forget facts: leak@1 above `threshold`."""
    est = t_ci(full_leak1)
    return judge(est, _thr(cfg), what="original leak@1"), est


def greedy_gap(greedy_m: Sequence[float], greedy_ret: Sequence[float], leak_m: Sequence[float],
               leak_ret: Sequence[float], greedy_margin: float, cfg: Mapping[str, Any]) -> tuple[Verdict, Estimate]:
    """Greedy looks forgotten but sampling leaks: given greedy acc <= retrain's + greedy_margin in every
    seed (else the premise fails: not testable), the paired leak@k difference method − retrain must
    exceed `threshold`. Retrain at the ceiling leaves no room: not testable."""
    rule = _thr(cfg)
    est = paired_diff(leak_m, leak_ret)
    missed = [i for i, (g, r) in enumerate(zip(greedy_m, greedy_ret)) if g > r + greedy_margin + 1e-12]
    untestable = None
    if missed:
        untestable = (f"greedy does not look forgotten in {len(missed)}/{len(greedy_m)} seeds (greedy acc "
                      f"{np.mean(greedy_m):.3f} > retrain {np.mean(greedy_ret):.3f} + {greedy_margin}): premise not met")
    elif float(np.mean(leak_ret)) >= 1.0 - float(cfg.get("ceiling_margin", 0.05)):
        untestable = f"retrain leak@k {np.mean(leak_ret):.3f} at the ceiling: no room to leak more"
    return judge(est, rule, untestable=untestable, what="Δleak@k (method − retrain)"), est


def sampling_excess(greedy_m: Sequence[float], leak_m: Sequence[float], greedy_ret: Sequence[float],
                    leak_ret: Sequence[float], cfg: Mapping[str, Any]) -> tuple[Verdict, Estimate]:
    """Sampling reveals more than greedy, beyond the retrain floor: per seed
    (leak@n − greedy)(method) − (leak@n − greedy)(retrain), CI across seeds, must exceed `threshold`.
    Unlike "leak@k grows with k" this can fail (a method at or below the floor gives ≤ 0)."""
    rule = _thr(cfg)
    excess = [(lm - gm) - (lr - gr) for gm, lm, gr, lr in zip(greedy_m, leak_m, greedy_ret, leak_ret)]
    est = t_ci(excess)
    margin = float(cfg.get("ceiling_margin", 0.05))
    untestable = None
    if float(np.mean(greedy_m)) >= 1.0 - margin:
        untestable = f"greedy accuracy {np.mean(greedy_m):.3f} at the ceiling: sampling cannot reveal more"
    elif float(np.mean(leak_ret)) >= 1.0 - margin:
        untestable = f"retrain leak@n {np.mean(leak_ret):.3f} at the ceiling: no room above the floor"
    return judge(est, rule, untestable=untestable, what="sampling excess over greedy beyond retrain"), est


def rule_vs_control(rule_leak: Sequence[float], control_leak: Sequence[float] | None, base_leak: Sequence[float],
                    retrain_leak: Sequence[float], rule_utility: Sequence[float],
                    cfg: Mapping[str, Any]) -> tuple[Verdict, Estimate]:
    """RULE beats its gold-only control: paired (control − RULE) leak@k across seeds must exceed
    `threshold`. Only then can it hold, and fully only if RULE's leak@k is also ≤ retrain's +
    `retrain_margin` and its utility (retain greedy accuracy) exceeds `utility_threshold` (else partly).
    Not testable: no control run, fewer seeds than `min_n`, or a base/control that does not leak
    (≤ `leak_floor`: nothing to remove)."""
    rule = _thr(cfg)
    floor = float(cfg.get("leak_floor", 0.01))
    if control_leak is None:
        return judge(NAN, rule, untestable="no gold-only control run (unlearning.rule.control: false)"), NAN
    est = paired_diff(control_leak, rule_leak)
    untestable = None
    if float(np.mean(base_leak)) <= floor:
        untestable = f"base method leak@k {np.mean(base_leak):.3f} ≤ {floor}: it never leaks, nothing to remove"
    elif float(np.mean(control_leak)) <= floor:
        untestable = f"control leak@k {np.mean(control_leak):.3f} ≤ {floor}: nothing left for RULE to beat"
    v_ctrl = judge(est, rule, untestable=untestable, what="leak@k control − RULE")
    if v_ctrl.outcome != HELD:
        return v_ctrl, est
    v_ret = judge(paired_diff(retrain_leak, rule_leak),
                  Thresholds(-float(cfg.get("retrain_margin", 0.0)), "greater", rule.min_n),
                  what="leak@k retrain − RULE")
    v_util = judge(t_ci(rule_utility), Thresholds(float(cfg["utility_threshold"]), "greater", rule.min_n),
                   what="RULE utility (retain greedy acc)")
    return combine([v_ctrl, v_ret, v_util]), est


def not_run(reason: str) -> Verdict:
    return Verdict(NOT_TESTABLE, reason)


__all__ = ["reference", "original_leaks", "greedy_gap", "sampling_excess", "rule_vs_control", "not_run",
           "HELD", "NOT_HELD"]
