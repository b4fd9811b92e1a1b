"""The fmri claims as pure functions: measured metrics in, a judged `Claim` out.

Every verdict comes from `paperflow.core.verdict.judge` with the thresholds declared under
`fmri.claims.<claim>` in the config (schema defaults in workflow/schemas/studies/fmri.schema.yaml);
nothing here hard-codes a decision threshold. Probe comparisons are paired by split: every feature
set is probed on the same subject-level splits (benchmarks.py), so `paired_diff` over the per-split
test scores gives the effect and its t CI. The splits re-sample one small cohort (they share
subjects), so that CI is narrower than one over independent cohorts would be.

Rules shared by the probe claims:
- fewer subjects than `min_subjects` or fewer splits than `min_n` -> not testable at this scale;
- a baseline/control probe at chance -> not testable (there is nothing to beat or to lose): a probe is
  at chance when its mean over splits is within `chance_margin` of chance or its t CI over splits
  reaches chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paperflow.core.report import Claim
from paperflow.core.stats import Estimate, fmt_mean_se, linear_fit, paired_diff, t_ci
from paperflow.core.verdict import (HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, PARTLY, Thresholds, Verdict,
                                    combine, judge)

STATE = "state6"
FC_STATE = "FC (parcel clip)"
FC_TRAIT = "FC (parcel, whole run)"
SPACES = ("flat", "parcel", "volume")


# ---- helpers -------------------------------------------------------------------------------------------

def at_chance(scores: Sequence[float], chance: float, margin: float) -> bool:
    """True when a probe's split scores do not lift it off chance: mean within `margin` of chance (or
    below it), or a t CI over splits whose lower end reaches chance."""
    est = t_ci(scores)
    if est.value - chance <= margin:
        return True
    return bool(est.has_ci and est.lo <= chance)  # type: ignore[operator]


def _mean_scores(entries: Sequence[Mapping[str, Any]]) -> list[float]:
    """Per-split scores averaged over the pretraining seeds (all seeds share the splits)."""
    return [float(x) for x in np.mean([e["scores"] for e in entries], axis=0)]


def mae_entries(task: Mapping[str, Any], space: str, random_init: bool = False) -> list[Mapping[str, Any]]:
    """The probe results of the MAE of one space: every pretrained seed (`MAE flat-s0`, ...), or the
    random-init control (`MAE flat-rand`)."""
    pre = f"MAE {space}-"
    if random_init:
        return [v for k, v in task.items() if k == f"{pre}rand"]
    return [v for k, v in sorted(task.items()) if k.startswith(pre) and k[len(pre):].startswith("s")]


def _seeds(n: int) -> str:
    return f"{n} pretraining seed{'s' if n != 1 else ''}"


def _acc(scores: Sequence[float]) -> str:
    """Mean ± s.e. over splits ('(1 split, no s.e.)' for one)."""
    return fmt_mean_se(scores, unit="splits")


def _too_few_subjects(n_subjects: int, cfg: Mapping[str, Any]) -> str | None:
    """The subject-count rule (too few splits is judge()'s own `min_n` rule)."""
    if n_subjects < int(cfg["min_subjects"]):
        return f"{n_subjects} subjects, below the declared minimum {cfg['min_subjects']}"
    return None


# ---- projection and throughput (spec items) ----------------------------------------------------------------

def projection(chk: Mapping[str, Any], cfg: Mapping[str, Any]) -> Claim:
    """The composed sparse operator equals the per-frame nilearn path on a known field."""
    rule = Thresholds.from_config(cfg)
    diff, rng = float(chk["max_abs_diff_vs_nilearn"]), float(chk["value_range"])
    untestable = None
    if not int(chk.get("D", 0)) or not rng > 0:
        untestable = f"degenerate test field (range {rng:g}, D = {chk.get('D', 0)}): nothing to compare"
    v = judge(Estimate(diff, n=1), rule, untestable=untestable, what="max abs. difference operator vs per-frame")
    return Claim.judged("Projection (volume→surface→flat) as one sparse operator equals the per-frame path "
                        "(nilearn vol_to_surf + barycentric interpolation)",
                        f"max abs. difference {diff:.2e} on the MNI-y field (range {rng:.0f} mm), D={chk.get('D')} pixels", v,
                        sample="1 field × every flat pixel (deterministic)", source="spec")


def throughput(fps: Sequence[float], cfg: Mapping[str, Any]) -> Claim:
    """Projection throughput of the prep jobs (frames through all three operators per second)."""
    rule = Thresholds.from_config(cfg)
    est = Estimate(float(min(fps)) if fps else float("nan"), n=len(fps))
    v = judge(est, rule, what="slowest prep job, frames/s")
    measured = (f"{min(fps):,.0f}–{max(fps):,.0f} frames/s (3 operators, sparse matmul only, prep jobs)" if fps
                else "no prep manifest with a throughput")
    return Claim.judged(f"Projection throughput ≥ {rule.threshold:,.0f} frames/s on 2 cores", measured, v,
                        sample=f"{len(fps)} prep jobs (minimum taken)", source="spec")


# ---- state decoding ---------------------------------------------------------------------------------

def state_vs_fc(met: Mapping[str, Any], cfg: Mapping[str, Any]) -> Claim | None:
    """Flat-map MAE ≫ connectome FC on state decoding: paired (MAE − FC) accuracy over splits must
    exceed `threshold`."""
    st = met["tasks"][STATE]
    flat = mae_entries(st, "flat")
    if not flat:
        return None
    rule = Thresholds.from_config(cfg)
    chance = float(met["chance"][STATE])
    mae, fc = _mean_scores(flat), [float(x) for x in st[FC_STATE]["scores"]]
    n_subj = int(met["n_state_subjects"])
    untestable = _too_few_subjects(n_subj, cfg)
    if untestable is None and at_chance(fc, chance, float(cfg["chance_margin"])):
        untestable = f"FC baseline at chance ({np.mean(fc):.3f} vs chance {chance:.3f}): nothing to beat"
    v = judge(paired_diff(mae, fc), rule, untestable=untestable, what="flat MAE − FC accuracy")
    return Claim.judged("State decoding: flat-map MAE ≫ connectome FC",
                        f"flat MAE {_acc(mae)}; FC {_acc(fc)}; chance {chance:.3f}",
                        v, paper="HCP task21 0.990 vs FC 0.824",
                        sample=f"{_seeds(len(flat))} × {len(fc)} subject-level splits × {n_subj} subjects "
                               f"({met.get('n_state_clips', '?')} clips)")


def space_order(met: Mapping[str, Any], cfg: Mapping[str, Any]) -> Claim | None:
    """Flat ≥ parcel ≥ volume on state decoding: two paired comparisons, combined."""
    st = met["tasks"][STATE]
    ent = {sp: mae_entries(st, sp) for sp in SPACES}
    if not all(ent.values()):
        return None
    rule = Thresholds.from_config(cfg)
    chance = float(met["chance"][STATE])
    sc = {sp: _mean_scores(e) for sp, e in ent.items()}
    n_subj = int(met["n_state_subjects"])
    n_splits = len(sc["flat"])
    untestable = _too_few_subjects(n_subj, cfg)
    if untestable is None:
        low = [sp for sp in SPACES if at_chance(sc[sp], chance, float(cfg["chance_margin"]))]
        if low:
            untestable = f"{', '.join(low)} MAE probe at chance (chance {chance:.3f})"
    parts = [judge(paired_diff(sc[a], sc[b]), rule, untestable=untestable, what=f"{a} − {b}")
             for a, b in (("flat", "parcel"), ("parcel", "volume"))]
    v = parts[0] if untestable else combine(parts)
    return Claim.judged("Flat ≥ parcel ≥ volume on state decoding",
                        " / ".join(f"{np.mean(sc[sp]):.3f}" for sp in SPACES) + " (flat / parcel / volume)", v,
                        paper="0.990 / 0.977 / 0.961 (HCP task21)",
                        sample=f"{_seeds(len(ent['flat']))} × {n_splits} subject-level splits × {n_subj} subjects")


def pretraining_helps(met: Mapping[str, Any], cfg: Mapping[str, Any]) -> Claim | None:
    """The pretrained flat encoder beats the same encoder at random init (paired over splits)."""
    st = met["tasks"][STATE]
    flat, rand = mae_entries(st, "flat"), mae_entries(st, "flat", random_init=True)
    if not flat or not rand:
        return None
    rule = Thresholds.from_config(cfg)
    chance = float(met["chance"][STATE])
    pre, rnd = _mean_scores(flat), _mean_scores(rand)
    n_subj = int(met["n_state_subjects"])
    untestable = _too_few_subjects(n_subj, cfg)
    if untestable is None and at_chance(rnd, chance, float(cfg["chance_margin"])):
        untestable = f"random-init control at chance ({np.mean(rnd):.3f} vs chance {chance:.3f})"
    v = judge(paired_diff(pre, rnd), rule, untestable=untestable, what="pretrained − random-init accuracy")
    return Claim.judged("Pretraining helps: pretrained flat encoder beats the same encoder at random init",
                        f"pretrained {_acc(pre)} vs random init {_acc(rnd)} (state6 accuracy)", v, source="spec",
                        sample=f"{_seeds(len(flat))} × {len(pre)} subject-level splits × {n_subj} subjects")


# ---- traits ------------------------------------------------------------------------------------------

TRAIT_PAPER = "FC within about one split-std of the best model on most trait tasks (e.g. ABIDE 0.630 vs FC 0.598)"


def trait_fc(met: Mapping[str, Any], task: str, cfg: Mapping[str, Any]) -> Claim | None:
    """'FC is hard to beat': the best MAE beats whole-run FC by less than `threshold` balanced accuracy
    (held when the CI of best MAE − FC lies entirely below it)."""
    tt = met["tasks"][task]
    maes = {sp: mae_entries(tt, sp) for sp in SPACES}
    maes = {sp: e for sp, e in maes.items() if e}
    if not maes:
        return None
    rule = Thresholds.from_config(cfg)
    chance = float(met["chance"][task])
    fc = [float(x) for x in tt[FC_TRAIT]["scores"]]
    sc = {sp: _mean_scores(e) for sp, e in maes.items()}
    best = max(sc, key=lambda sp: np.mean(sc[sp]))  # the strongest MAE against FC: favours rejecting the claim
    n_subj = int(met["n_trait_subjects"])
    untestable = _too_few_subjects(n_subj, cfg)
    if untestable is None and at_chance(fc, chance, float(cfg["chance_margin"])):
        untestable = f"FC baseline at chance ({np.mean(fc):.3f} vs chance {chance:.3f}): nothing to beat"
    v = judge(paired_diff(sc[best], fc), rule, untestable=untestable, what=f"best MAE ({best}) − FC")
    oracle = tt.get("oracle true R[1,2]")
    measured = f"best MAE ({best}) {_acc(sc[best])}; FC {_acc(fc)}; chance {chance:.3f}"
    if oracle:
        measured += f"; oracle {oracle['mean']:.3f}"
    return Claim.judged(f"Traits ({task}): no MAE beats FC by {rule.threshold:g} or more (FC is hard to beat)",
                        measured, v, paper=TRAIT_PAPER,
                        sample=f"{_seeds(len(maes[best]))} × {len(fc)} subject-level splits × {n_subj} subjects")


# ---- scaling -----------------------------------------------------------------------------------------

def loglog_fit(frames: Sequence[float], loss: Sequence[float]) -> dict[str, Any] | None:
    """log L on log N (core.stats.linear_fit): slope with its t CI, R², monotone; None below 2 sizes."""
    if len(frames) < 2 or len(set(frames)) < 2:
        return None
    f = linear_fit(np.log(frames), np.log(loss))
    return {"slope": f.slope, "lo": f.lo, "hi": f.hi, "r2": f.r2, "n": f.n, "monotone": f.monotone}


def scaling(fit: Mapping[str, Any], cfg: Mapping[str, Any], n_seeds: int = 1) -> Claim:
    """Validation loss falls with pretraining data as a small negative power law.

    `fit`: `frames`, `loss` (best validation loss, mean per size) and `loss_init` (validation loss
    before training, mean per size), as scaling.py writes them. Decision:
    - fewer sizes than `min_n`, or runs that did not learn (best loss less than `min_rel_improvement`
      below the initial loss: data size cannot matter yet) -> not testable at this scale;
    - slope CI of the log-log fit (core.stats.linear_fit) vs `threshold` (0, direction less):
      entirely below -> the loss falls; then held only when the fit is good (R² ≥ `min_r2`) and the
      curve monotone, else partly; CI covering 0 -> inconclusive; entirely at/above 0 -> did not hold.
    """
    rule = Thresholds.from_config(cfg)
    frames, loss = [float(x) for x in fit["frames"]], [float(x) for x in fit["loss"]]
    init = [float(x) for x in fit.get("loss_init") or []]
    n = len(frames)
    paper = "b = −0.014 (HCP), −0.017 (NSD); 3-point fit on 1/2/4 subject batches"
    sizes = fit.get("sizes", ["?"] * n)
    sample = f"{n} data sizes ({', '.join(map(str, sizes))} subjects) × {_seeds(n_seeds)}"
    base = f"best val loss {', '.join(f'{x:.4f}' for x in loss)} at {', '.join(f'{x:,.0f}' for x in frames)} frames"
    claim = "Data scaling: validation loss falls monotonically with data as a small negative power law"
    lf = loglog_fit(frames, loss) if n >= 2 else None
    untestable = None
    if n < rule.min_n or lf is None:
        untestable = f"{n} data sizes, below the declared minimum {rule.min_n}"
    elif init and len(init) == n:
        gain = [1 - l / i for l, i in zip(loss, init)]
        if max(gain) < float(cfg["min_rel_improvement"]):
            untestable = (f"the runs barely trained: best validation loss at most {100 * max(gain):+.2f}% below the "
                          f"loss before training ({np.mean(init):.4f}); declared minimum "
                          f"{100 * float(cfg['min_rel_improvement']):.1f}%")
    if untestable:
        return Claim.judged(claim, base, judge(Estimate(float("nan"), n=n), rule, untestable=untestable),
                            paper=paper, sample=sample)
    assert lf is not None
    measured = f"{base}; log-log slope b = {lf['slope']:.4f}" + (
        f" [{lf['lo']:.4f}, {lf['hi']:.4f}]" if lf["lo"] is not None else " (no CI)") + \
        f", R² {lf['r2']:.2f}, {'monotone' if lf['monotone'] else 'not monotone'}"
    slope = judge(Estimate(lf["slope"], lf["lo"], lf["hi"], lf["n"]), rule, what="log-log slope b")
    if slope.outcome != HELD:  # the loss does not clearly fall: that decides (fit quality only in the reason)
        extra = f"; R² {lf['r2']:.2f}, {'monotone' if lf['monotone'] else 'not monotone'}"
        return Claim.judged(claim, measured, Verdict(slope.outcome, slope.reason + extra), paper=paper, sample=sample)
    # it falls: held only with a good power-law fit and a monotone curve, else partly (core.verdict.combine)
    r2 = judge(Estimate(lf["r2"], n=lf["n"]), Thresholds(float(cfg["min_r2"]), "greater", rule.min_n),
               what="log-log fit R²")
    mono = Verdict(HELD, "loss monotone in data") if lf["monotone"] else Verdict(NOT_HELD, "loss not monotone in data")
    return Claim.judged(claim, measured, combine([slope, r2, mono]), paper=paper, sample=sample)


__all__ = ["at_chance", "projection", "throughput", "state_vs_fc", "space_order", "pretraining_helps", "trait_fc",
           "loglog_fit", "scaling", "HELD", "NOT_HELD", "NOT_TESTABLE", "INCONCLUSIVE", "PARTLY"]
