"""The expalign summary: each claim of the spec, the number we measured and its verdict.

Every verdict comes from `core.verdict.judge` with the thresholds declared in the schema under
`expalign.claims.*`. The sample is the seeds: each effect is a per-seed difference between a method arm
and its control (same seed = same initialisation stream and the same batches), with a t CI over seeds.
The claim functions are pure (metrics.json + the claims section in, `Claim` out), so
tests/expalign/test_verdicts.py drives them with synthetic metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.report import Claim, write_summary
from paperflow.core.stats import Estimate, fmt_mean_se, paired_diff
from paperflow.core.verdict import HELD, INCONCLUSIVE, Thresholds, Verdict, judge

# metric key -> (path in an arm's evaluation, chance path or None)
METRICS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "pointing": (("pointing", "acc"), ("pointing", "chance")),
    "phrase_map": (("phrase_map", "map"), ("phrase_map", "chance")),
    "ap50": (("box", "ap50"), None),
    "swap": (("attribute_swap", "both"), None),
    "swap_colour": (("attribute_swap", "colour"), None),
    "swap_shape": (("attribute_swap", "shape"), None),
    "within_peak": (("concentration", "within_peak"), None),
    "in_out": (("concentration", "in_out"), None),
}
SPLITS = ("seen", "rare", "all")
CHANCE_SWAP = 0.5


def _get(d: Any, path: Sequence[str]) -> Any:
    for k in path:
        if d is None:
            return None
        d = d.get(k)
    return d


def collect(runs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """metrics["arms"][arm][metric][split] = per-seed list (None where undefined), seeds in `seeds` order."""
    runs = sorted(runs, key=lambda r: r["seed"])
    seeds = [int(r["seed"]) for r in runs]
    arms: dict[str, Any] = {}
    for arm in runs[0]["arms"]:
        a: dict[str, Any] = {}
        for key, (path, cpath) in METRICS.items():
            for tag, p in (("", path), ("_chance", cpath)):
                if p is None:
                    continue
                a[key + tag] = {s: [_get(_get(r["arms"].get(arm), p), [s]) for r in runs] for s in SPLITS}
        a["n"] = {"pointing_pairs": {s: _get(runs[0]["arms"][arm], ("pointing", "acc", f"n_{s}")) for s in SPLITS},
                  "phrases": {s: _get(runs[0]["arms"][arm], ("phrase_map", "map", f"n_{s}")) for s in SPLITS}}
        arms[arm] = a
    return {"seeds": seeds, "arms": arms, "n_test": meta.get("n_test"), "n_train": meta.get("n_train"),
            "n_rare_phrases": meta.get("n_rare"), "n_phrases": len(meta.get("phrases", [])),
            "rare_positive_in_train": meta.get("rare_positive_in_train", [])}


def values(metrics: Mapping[str, Any], arm: str, key: str, split: str) -> list[float] | None:
    a = metrics["arms"].get(arm)
    if a is None or key not in a:
        return None
    v = a[key][split]
    if any(x is None for x in v):
        return None
    return [float(x) for x in v]


def _fmt(vals: Sequence[float] | None) -> str:
    return "n/a" if not vals else fmt_mean_se(vals)


def _est(e: Estimate) -> str:
    return e.fmt(3)


def compare(metrics: Mapping[str, Any], ccfg: Mapping[str, Any], name: str, method: str, control: str, key: str,
            split: str, *, chance_key: str | None = None, chance_value: float | None = None,
            all_seeds: bool = False) -> tuple[Verdict, str, Estimate | None]:
    """Judge method − control (paired by seed) on metrics[key][split]."""
    rule = Thresholds.from_config(ccfg[name])
    a, b = values(metrics, method, key, split), values(metrics, control, key, split)
    if a is None or b is None:
        missing = method if a is None else control
        return (judge(Estimate(float("nan"), n=0), rule, untestable=f"arm {missing} was not run or has no {key} "
                      f"on {split} phrases"), "not measured", None)
    eff = paired_diff(a, b)
    untestable = None
    chance = None
    if chance_key is not None:
        cv = values(metrics, control, chance_key, split)
        chance = float(np.mean(cv)) if cv else None
    elif chance_value is not None:
        chance = chance_value
    margin = float(ccfg["chance_margin"])
    if chance is not None and float(np.mean(b)) <= chance + margin:
        untestable = f"control {control} at chance ({np.mean(b):.3f} vs chance {chance:.3f} + {margin})"
    v = judge(eff, rule, untestable=untestable, what=f"{method} − {control}")
    if all_seeds and v.outcome == HELD and not all(x > y for x, y in zip(a, b)):
        v = Verdict(INCONCLUSIVE, f"{v.reason}; but {method} ≤ {control} in some seed (the rule needs every seed)")
    measured = (f"{method} {_fmt(a)} vs {control} {_fmt(b)}; difference {_est(eff)}"
                + (f"; chance {chance:.3f}" if chance is not None else ""))
    return v, measured, eff


def _seeds(metrics: Mapping[str, Any]) -> str:
    n = len(metrics["seeds"])
    return f"{n} seed{'s' if n != 1 else ''} (paired), {metrics.get('n_test')} test images"


def claim_rare_gain(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "rare_gain", "C", "A", "pointing", "rare", chance_key="pointing_chance",
                         all_seeds=True)
    return Claim.judged("The expectation head (C) helps rare (held-out) colour x shape combinations over the "
                        "sentence-level BN head (A): pointing accuracy on rare phrases, C > A in every seed",
                        meas, v, sample=_seeds(m), paper="36.2 AP_r on LVIS minival (not comparable: tiny synthetic data)")


def claim_topk_vs_mean(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "topk_vs_mean", "C", "E", "pointing", "all", chance_key="pointing_chance")
    return Claim.judged("Top-K spatial pooling (C) beats mean pooling (E) on pointing accuracy under image-level "
                        "labels", meas, v, sample=_seeds(m), source="spec")


def claim_filler(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "filler_prompts", "C_filler", "A_filler", "pointing", "all",
                         chance_key="pointing_chance")
    thr = cc["filler_prompts"]["threshold"]
    return Claim.judged(f"With filler-word prompts the token softmax selects the informative tokens: C ≥ A "
                        f"(pointing, margin {thr})", meas, v, sample=_seeds(m), source="spec")


def claim_gaco_concentration(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "gaco_concentration", "D", "C", "within_peak", "all")
    return Claim.judged("GACO (D) sharpens the map within objects: within-object peak contrast "
                        "(max_in − mean_in) / std_map above C", meas, v, sample=_seeds(m), source="spec")


def claim_gaco_in_out(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "gaco_in_out", "D", "C", "in_out", "all")
    return Claim.judged("GACO does NOT raise the in/out contrast (spec's derived expectation: Σ_M A = 0). "
                        "Judged as 'D raises in/out contrast over C'; 'did not hold' is the expected outcome",
                        meas, v, sample=_seeds(m), source="spec")


def claim_box_term(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "box_term", "F", "C", "ap50", "all")
    return Claim.judged("The box in/out term (F) improves localisation over C: box AP@0.5 from the thresholded "
                        "map", meas, v, sample=_seeds(m), source="paper")


def claim_attribute_swap(m: Mapping[str, Any], cc: Mapping[str, Any]) -> Claim:
    v, meas, _ = compare(m, cc, "attribute_swap", "C", "A", "swap", "all", chance_value=CHANCE_SWAP)
    return Claim.judged("Attribute-swap probe (sign uncertain per spec): P(score of present phrase > score of its "
                        "colour- or shape-swapped absent phrase), C above A", meas, v, sample=_seeds(m),
                        source="spec")


CLAIMS = (claim_rare_gain, claim_topk_vs_mean, claim_filler, claim_gaco_concentration, claim_gaco_in_out,
          claim_box_term, claim_attribute_swap)


def claims(metrics: Mapping[str, Any], ccfg: Mapping[str, Any]) -> list[Claim]:
    return [f(metrics, ccfg) for f in CLAIMS]


def table(metrics: Mapping[str, Any]) -> str:
    keys = [("pointing", "pointing"), ("ap50", "box AP@0.5"), ("phrase_map", "phrase mAP"), ("swap", "attr-swap"),
            ("within_peak", "within-obj peak"), ("in_out", "in/out contrast")]
    head = "| arm | " + " | ".join(f"{lab} seen | {lab} rare" for _, lab in keys) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(keys))]
    for arm in metrics["arms"]:
        cells = []
        for k, _ in keys:
            for s in ("seen", "rare"):
                v = values(metrics, arm, k, s)
                cells.append(_fmt(v) if v else "n/a")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rare_difference(metrics: Mapping[str, Any]) -> str:
    """C − A on rare phrases for every metric, with its CI (the honesty rule's fallback statement)."""
    out = []
    for k in ("pointing", "ap50", "phrase_map", "swap"):
        a, b = values(metrics, "C", k, "rare"), values(metrics, "A", k, "rare")
        if a and b:
            wins = sum(x > y for x, y in zip(a, b))
            out.append(f"- {k}: C − A = {_est(paired_diff(a, b))}; C > A in {wins}/{len(a)} seeds")
    return "\n".join(out) or "- (arms A and C were not both run)"


def write(metrics: Mapping[str, Any], cfg: Mapping[str, Any], out: str | Path, inputs: Sequence[str]) -> None:
    cl = claims(metrics, cfg["claims"])
    ch = metrics["arms"].get("A", {}).get("pointing_chance", {}).get("all")
    chance = f"{np.mean(ch):.3f}" if ch and None not in ch else "n/a"
    body = f"""
## What this study tests

This study tests the **alignment head and the weak-supervision losses** of ExpAlign on a tiny synthetic
grounding task — not long-tail detection at LVIS scale. Images are 32×32 canvases with 1–3 coloured shapes;
phrases are "size colour shape" ({metrics.get('n_phrases')} phrases, {metrics.get('n_rare_phrases')} of them
rare: colour × shape combinations never positive in training). Text: frozen MiniLM-L6 token states with a
trainable linear map; image: a 3-layer CNN giving an 8×8 map. Every image is scored against the whole
vocabulary. The training recipe (head + loss weights λ_mp = λ_box = λ_geo = 0.5) is **[recon]**: the
official repository has every piece but never wires them together; the detection branch (DFL, CIoU,
assigner) is not part of the tiny model. By our algebra the expectation head is a sentence-level dot
product whose token weights adapt to the image; any difference between C and A is attributed to those
adaptive weights (and to the head's unnormalised token embeddings), not to extra capacity.

## Rare combinations (honesty rule)

"The expectation head helps rare combinations" is claimed only if C beats A on the rare split in all
seeds with a CI above 0 (first claim). Differences C − A on rare phrases, with 95% t CIs over seeds:

{rare_difference(metrics)}

## All arms ({len(metrics['seeds'])} seeds: mean ± s.e.; pointing chance ≈ {chance})

A sentence BN head · B token max · C expectation head + top-K (ρ = 1%, k = 1 at 8×8) · C_rho5 ρ = 5%
(k = 3) · E mean spatial pooling · D + GACO (live advantages) · D_detached (detached advantages) ·
F + box in/out · *_filler: prompts "there is a … in the picture".

{table(metrics)}

Rare phrases seen as positives in training: {metrics.get('rare_positive_in_train') or 'none'} (must be none).
Every arm is reported in full above (no best-cell selection). The loss and head constants are the official
ones where the code has them. The training knobs steps = {cfg['train']['steps']} and lr = {cfg['train']['lr']:g} are
the choice of a pre-declared grid (steps {{{', '.join(str(x) for x in cfg['selection']['steps'])}}} × lr
{{{', '.join(f'{x:g}' for x in cfg['selection']['lr'])}}}) scored on the **validation** split only — images held
out from the generated training images, so they hold no rare combination — by the mean validation pointing
of arms {' and '.join(cfg['selection']['arms'])} (seed {cfg['selection']['seed']}; one number for both arms, ties to
the cheaper cell; `bench/expalign_select.py`, the full grid with its numbers in
`src/paperflow/expalign/README.md`). Batch size {cfg['train']['batch_size']} and the CNN's strides (2, 2, 1 → the spec's 8×8
map) were not part of the grid; batch 32 was first set on scratch runs scored on test data (before the
validation split existed) and is kept as a budget setting. No arm-specific setting was tuned; the test
split is read only by `evaluate`.
"""
    write_summary(out, "expalign", "ExpAlign — expectation alignment head, top-K loss, GACO (tiny synthetic grounding)",
                  cl, body, cfg, inputs)
