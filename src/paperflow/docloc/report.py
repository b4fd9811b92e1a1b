"""The docloc study's metrics and summary: each claim, our number with seeds and CI, its verdict.

Every verdict comes from `core.verdict.judge` / `combine` with the thresholds declared in the schema
under `docloc.claims.*`. Effects are paired differences between two arms on the same test questions and
the same training seeds; the CI is a two-level percentile bootstrap (seeds, then questions), so both
the training seeds and the finite test set count. A control at floor (nothing to beat), too few seeds
or questions make a claim "not testable at this scale". The JKO arm judged against the controls is
chosen on the validation split (the better of jko_b / jko_a by val acc@IoU 0.5), never on a test split.
The claim functions are pure (metrics + the claims section in, `Claim`s out) for tests/docloc/test_verdicts.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.report import Claim, write_summary
from paperflow.core.stats import Estimate, fmt_mean_se, two_level_bootstrap
from paperflow.core.verdict import HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, Thresholds, Verdict, combine, judge

METRICS = ("acc50", "iou", "mass", "em", "anls")
JKO_ARMS = ("jko_b", "jko_a")
ARM_NAMES = {"single": "(i) single-step", "now2": "(ii) no-W2", "jko_b": "(iii) JKO-consistency",
             "jko_a": "(iv) unrolled JKO", "poe": "(v) PoE"}
RECON = "reconstruction [recon]: the abstract gives no method details"
PAPER_LOC = "no number in the abstract (\"significantly outperforms existing approaches\")"


# ---- aggregation ---------------------------------------------------------------------------------------

def aggregate_runs(runs: Sequence[Mapping[str, Any]], mechanics: Mapping[str, Any] | None) -> dict[str, Any]:
    """metrics.json: per variant → seed → split → metric → per-question list (sorted by questionId), and
    the per-stage IoU means; plus the mechanics rerun's per-page results."""
    out: dict[str, Any] = {}
    for r in sorted(runs, key=lambda r: (r["params"]["variant"], r["params"]["seed"])):
        p = r["params"]
        v = out.setdefault(p["variant"], {"arm": p["arm"], "tau": p["tau"], "stages": p["stages"], "seeds": {}})
        per = {}
        for split, rows in r["splits"].items():
            rows = sorted(rows, key=lambda q: q["qid"])
            per[split] = {m: [float(q[m]) for q in rows] for m in METRICS}
            per[split]["qid"] = [int(q["qid"]) for q in rows]
            per[split]["iou_first"] = [float(q["iou_stages"][0]) for q in rows]
            per[split]["iou_stages"] = np.mean([q["iou_stages"] for q in rows], axis=0).tolist()
        v["seeds"][str(p["seed"])] = {"splits": per, "gamma": r.get("gamma"),
                                      "final_loss": r["history"][-1]["loss"] if r["history"] else None}
    return {"runs": out, "mechanics": mechanics}


def per_seed_mean(metrics: Mapping[str, Any], variant: str, split: str, metric: str) -> list[float]:
    seeds = metrics["runs"][variant]["seeds"]
    return [float(np.mean(seeds[s]["splits"][split][metric])) for s in sorted(seeds, key=int)]


def _matrix(metrics: Mapping[str, Any], variant: str, split: str, metric: str, seeds: Sequence[str]) -> np.ndarray:
    return np.array([metrics["runs"][variant]["seeds"][s]["splits"][split][metric] for s in seeds], float)


def paired_effect(metrics: Mapping[str, Any], a: str, b: str, split: str, metric: str,
                  boot: Mapping[str, Any]) -> tuple[Estimate, int]:
    """a − b on `split`/`metric`, paired by seed and question; (estimate, number of shared seeds)."""
    sa, sb = metrics["runs"][a]["seeds"], metrics["runs"][b]["seeds"]
    seeds = sorted(set(sa) & set(sb), key=int)
    if not seeds:
        return Estimate(float("nan"), n=0), 0
    qa = [sa[s]["splits"][split]["qid"] for s in seeds]
    qb = [sb[s]["splits"][split]["qid"] for s in seeds]
    if any(x != qa[0] for x in qa + qb):
        raise ValueError(f"{a} and {b} were evaluated on different {split} questions")
    d = _matrix(metrics, a, split, metric, seeds) - _matrix(metrics, b, split, metric, seeds)
    return two_level_bootstrap(d, int(boot["n_boot"]), seed=int(boot["seed"])), len(seeds)


def jko_arm(metrics: Mapping[str, Any]) -> str | None:
    """The JKO arm judged against the controls: the better of jko_b / jko_a on *validation* acc@IoU 0.5."""
    have = [a for a in JKO_ARMS if a in metrics["runs"]]
    if not have:
        return None
    return max(have, key=lambda a: (float(np.mean(per_seed_mean(metrics, a, "val", "acc50"))), a == "jko_b"))


# ---- claims --------------------------------------------------------------------------------------------

def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _th(ccfg: Mapping[str, Any], key: str) -> Thresholds:
    return Thresholds.from_config(ccfg[key])


def _fmt(e: Estimate) -> str:
    if e.value != e.value:
        return "—"
    ci = f" [{e.lo:+.3f}, {e.hi:+.3f}]" if e.has_ci else " (no CI)"
    return f"{e.value:+.3f}{ci}"


def _mean(metrics: Mapping[str, Any], v: str, split: str, metric: str) -> str:
    return fmt_mean_se(per_seed_mean(metrics, v, split, metric))


def compare(metrics: Mapping[str, Any], ccfg: Mapping[str, Any], key: str, a: str | None, b: str,
            split: str, metric: str, claim: str, *, paper: str = PAPER_LOC) -> Claim:
    """One paired comparison a − b judged by `claims.<key>`; not testable when an arm is missing, the
    control is at floor, or seeds/questions are too few."""
    c = ccfg[key]
    rule = _th(ccfg, key)
    runs = metrics["runs"]
    missing = [x for x in (a, b) if x is None or x not in runs]
    if missing:
        v = Verdict(NOT_TESTABLE, f"arm(s) not run: {missing}")
        return Claim.judged(claim, "—", v, sample="—", paper=paper, source="spec")
    assert a is not None
    eff, n_seeds = paired_effect(metrics, a, b, split, metric, ccfg["bootstrap"])
    ctrl = float(np.mean(per_seed_mean(metrics, b, split, metric)))
    untestable = None
    if n_seeds < int(c["min_seeds"]):
        untestable = f"{n_seeds} shared seed(s), declared minimum {c['min_seeds']}"
    elif ctrl <= float(c["floor"]):
        untestable = f"control {b} at floor: {metric} {ctrl:.3f} ≤ {c['floor']:g} (nothing to beat)"
    v = judge(eff, rule, untestable=untestable, what=f"{a} − {b} {split} {metric}")
    measured = (f"{a} {_mean(metrics, a, split, metric)} vs {b} {_mean(metrics, b, split, metric)}; "
                f"paired diff {_fmt(eff)}")
    return Claim.judged(claim, measured, v, sample=f"{_seeds(n_seeds)} × {eff.n} {split} questions (paired)",
                        paper=paper, source="spec")


def claim_coarse_to_fine(metrics: Mapping[str, Any], ccfg: Mapping[str, Any]) -> Claim:
    """IoU(stage K) − IoU(stage 1) on OOD for the selected JKO arm, paired by seed and question;
    no-W2's curve is reported beside it (it is trained to the same blurred targets)."""
    c = ccfg["coarse_to_fine"]
    a = jko_arm(metrics)
    claim = "Localisation proceeds coarse-to-fine: box IoU rises from stage 1 to stage K (OOD)"
    if a is None:
        return Claim.judged(claim, "—", Verdict(NOT_TESTABLE, "no JKO arm run"), sample="—", paper=PAPER_LOC,
                            source="paper")
    seeds = sorted(metrics["runs"][a]["seeds"], key=int)
    last = _matrix(metrics, a, "test_ood", "iou", seeds)
    d = last - _matrix(metrics, a, "test_ood", "iou_first", seeds)
    eff = two_level_bootstrap(d, int(ccfg["bootstrap"]["n_boot"]), seed=int(ccfg["bootstrap"]["seed"]))
    curves = [metrics["runs"][a]["seeds"][s]["splits"]["test_ood"]["iou_stages"] for s in seeds]
    untestable = None
    if len(seeds) < int(c["min_seeds"]):
        untestable = f"{len(seeds)} seed(s), declared minimum {c['min_seeds']}"
    elif len(curves[0]) < 2:
        untestable = f"{a} has a single stage"
    elif float(last.mean()) <= float(c["floor"]):
        untestable = f"{a}'s final OOD IoU {float(last.mean()):.3f} ≤ {c['floor']:g}: nothing is localised"
    v = judge(eff, _th(ccfg, "coarse_to_fine"), untestable=untestable, what=f"{a} IoU stage K − stage 1")
    ctrl = ""
    if "now2" in metrics["runs"]:
        nc = np.mean([d["splits"]["test_ood"]["iou_stages"] for d in metrics["runs"]["now2"]["seeds"].values()], axis=0)
        ctrl = f"; no-W2 (control: multi-stage supervision alone) {[round(float(x), 3) for x in nc]}"
    mean_curve = np.mean(curves, axis=0)
    return Claim.judged(claim, f"{a} IoU by stage {[round(float(x), 3) for x in mean_curve]}, "
                        f"K − 1: {_fmt(eff)}{ctrl}", v, sample=f"{_seeds(len(seeds))} × {eff.n} test_ood questions (paired)",
                        paper=PAPER_LOC, source="paper")


def claims_main(metrics: Mapping[str, Any], ccfg: Mapping[str, Any]) -> list[Claim]:
    a = jko_arm(metrics)
    an = f"{ARM_NAMES.get(a or '', a)} (chosen on val)"
    return [
        compare(metrics, ccfg, "jko_vs_single", a, "single", "test_ood", "acc50",
                f"One-step localisers fail where {an} does not: OOD acc@IoU0.5 of JKO − single-step"),
        compare(metrics, ccfg, "jko_vs_now2", a, "now2", "test_ood", "acc50",
                f"The W₂ (JKO) term adds to multi-stage supervision: OOD acc@IoU0.5 of {an} − no-W2"),
        compare(metrics, ccfg, "jko_vs_poe", a, "poe", "test_ood", "acc50",
                f"JKO is not explained by a coarse prior: OOD acc@IoU0.5 of {an} − PoE ≥ −margin"),
        compare(metrics, ccfg, "now2_vs_single", "now2", "single", "test_ood", "acc50",
                "Multi-stage supervision beats one step: OOD acc@IoU0.5 of no-W2 − single-step (spec chain (ii) > (i))"),
        claim_coarse_to_fine(metrics, ccfg),
        compare(metrics, ccfg, "answers", a, "single", "test_ood", "anls",
                f"Better evidence gives better answers: OOD ANLS of {an} − single-step",
                paper="no number in the abstract (\"... and answer generation\")"),
    ]


def claim_qualitative(parts: Sequence[Claim]) -> Claim:
    """Spec §6: (iii)/(iv) > (ii) > (i) on OOD acc@0.5, (iii)/(iv) ≥ (v), IoU rising across stages."""
    need = [c for c in parts if any(k in c.claim for k in ("W₂ (JKO) term", "coarse prior", "Multi-stage", "coarse-to-fine"))]
    v = combine([Verdict(c.verdict, c.reason) for c in need])
    measured = "; ".join(f"{c.claim.split(':')[0][:40]}… → {c.verdict}" for c in need)
    return Claim.judged("The paper's qualitative claim at tiny scale (spec §6): JKO > no-W2 > single, JKO ≥ PoE, "
                        "IoU rising over stages", measured, v, sample="the four claims above", paper=PAPER_LOC,
                        source="spec")


def claims_mechanics(mech: Mapping[str, Any] | None, ccfg: Mapping[str, Any]) -> list[Claim]:
    """Arm (vi), fixed potentials: JKO at the declared (τ, K) vs one-step Gibbs and vs PoE, paired by page."""
    if not mech:
        v = Verdict(NOT_TESTABLE, "mechanics rerun disabled")
        return [Claim.judged("Fixed potentials: JKO path beats one-step Gibbs", "—", v, sample="—", source="spec")]
    p = mech["params"]
    key = f"jko_t{float(p['judge_tau']):g}_K{int(p['judge_k'])}"
    out = []
    for name, ctrl, text in (("mech_jko_vs_gibbs", "gibbs", "one-step fine Gibbs"),
                             ("mech_jko_vs_poe", "poe", "PoE ρ₀·e^{−V/β}")):
        c = ccfg[name]
        parts = []
        meas = []
        for off, res in mech["per_page"].items():
            if key not in res:
                parts.append(Verdict(NOT_TESTABLE, f"{key} not in the mechanics grid"))
                continue
            d = np.asarray(res[key], float) - np.asarray(res[ctrl], float)
            eff = two_level_bootstrap(d[None, :], int(ccfg["bootstrap"]["n_boot"]), seed=int(ccfg["bootstrap"]["seed"]))
            acc_c = float(np.mean(res[ctrl]))
            unt = (f"{ctrl} at ceiling ({acc_c:.2f}) at off={off}" if acc_c >= 1.0 - float(c["ceiling_margin"])
                   else None)
            parts.append(judge(eff, _th(ccfg, name), untestable=unt, what=f"off={off}: {key} − {ctrl}"))
            meas.append(f"off={off}: JKO {np.mean(res[key]):.2f} vs {ctrl} {acc_c:.2f} (coarse {np.mean(res['coarse']):.2f}), "
                        f"diff {_fmt(eff)}")
        out.append(Claim.judged(f"Fixed potentials (§5 rerun): JKO (τ={p['judge_tau']:g}, K={p['judge_k']}) beats {text}",
                                "; ".join(meas), combine(parts), sample=f"{p['pages']} pages per offset (paired)",
                                paper="no number in the paper (spec pilot: 0.95 vs 0.60 Gibbs, 0.95 PoE at off=0.12)",
                                source="spec"))
    return out


def explanation(claims: Sequence[Claim], poe_gammas: Sequence[float] = ()) -> str:
    """The honesty sentences of spec §7, from the verdicts (never from hopes). `poe_gammas`: the γ PoE
    chose on validation per seed (γ = 0 everywhere: PoE is its sharp-target fine head alone)."""
    w2 = next((c for c in claims if "W₂ (JKO) term" in c.claim), None)
    poe = next((c for c in claims if "coarse prior" in c.claim), None)
    lines = []
    if w2 is not None:
        if w2.verdict == NOT_HELD:
            lines.append("- JKO vs no-W2: **did not hold** — JKO is not better than multi-stage supervision without the "
                         "W₂ term; any progressive gain is explained by multi-stage supervision, not by the Wasserstein term.")
        elif w2.verdict == INCONCLUSIVE:
            lines.append("- JKO vs no-W2: **inconclusive** — JKO ≈ no-W2 within the CI; no gain is attributable to the "
                         "Wasserstein term at this scale.")
        elif w2.verdict == HELD:
            lines.append("- JKO vs no-W2: **held** — the W₂ term adds to multi-stage supervision here.")
        else:
            lines.append(f"- JKO vs no-W2: **{w2.verdict}** ({w2.reason}) — no statement about the W₂ term.")
    if poe is not None:
        if poe.verdict == NOT_HELD and poe_gammas and all(g == 0 for g in poe_gammas):
            lines.append("- JKO vs PoE: **did not hold** — PoE beats JKO by more than the margin, but validation chose "
                         "γ = 0 on every seed, i.e. PoE's fine head alone (trained to the sharp mask): JKO loses to a "
                         "one-step head, and a coarse prior adds nothing here.")
        elif poe.verdict == NOT_HELD:
            lines.append("- JKO vs PoE: **did not hold** — the product of a coarse and a fine head beats JKO by more than "
                         "the margin: the gain is explained by the coarse prior, not by the transport path.")
        elif poe.verdict == INCONCLUSIVE:
            lines.append("- JKO vs PoE: **inconclusive** — JKO and PoE cannot be separated; a coarse prior may explain "
                         "what JKO gains.")
        elif poe.verdict == HELD:
            lines.append("- JKO vs PoE: **held** — JKO is at least as good as PoE (non-inferiority margin).")
        else:
            lines.append(f"- JKO vs PoE: **{poe.verdict}** ({poe.reason}).")
    return "\n".join(lines)


# ---- summary -------------------------------------------------------------------------------------------

def table(metrics: Mapping[str, Any]) -> str:
    rows = ["| run | split | acc@IoU0.5 | mean IoU | mass on evidence | exact match | ANLS | IoU by stage |",
            "|---|---|---|---|---|---|---|---|"]
    for v, r in metrics["runs"].items():
        for split in ("test_id", "test_ood"):
            seeds = sorted(r["seeds"], key=int)
            st = np.mean([r["seeds"][s]["splits"][split]["iou_stages"] for s in seeds], axis=0)
            cells = [fmt_mean_se(per_seed_mean(metrics, v, split, m)) for m in METRICS]
            rows.append(f"| {ARM_NAMES.get(v, v)} | {split} | " + " | ".join(cells)
                        + f" | {[round(float(x), 3) for x in st]} |")
    return "\n".join(rows)


def write(metrics: Mapping[str, Any], cfg: Mapping[str, Any], out: str | Path, inputs: Sequence[str]) -> None:
    ccfg = cfg["claims"]
    main = claims_main(metrics, ccfg)
    claims = main + [claim_qualitative(main)] + claims_mechanics(metrics.get("mechanics"), ccfg)
    gam = {s: d["gamma"] for s, d in metrics["runs"].get("poe", {}).get("seeds", {}).items()}
    body = f"""
Everything beyond the paper's abstract is a **{RECON}** (spec doc_localization.md): the energy, the JKO
step, both trainable objectives, the controls and the synthetic pages. Data: {cfg['data']['source']}
pages; {cfg['seeds']} training seed(s) per arm; the JKO arm judged is chosen on validation
(`{jko_arm(metrics)}`); PoE's γ chosen on validation per seed: {gam or '—'}. CIs: 95% two-level
bootstrap over seeds and test questions of the paired difference (same seeds, same questions).

## Honesty notes (spec §7)
{explanation(claims, [float(g) for g in gam.values() if g is not None])}
- A monotone IoU-vs-stage curve alone is not evidence: no-W2 is trained to the same blurred targets and
  shows one too (the coarse-to-fine row lists both).

## All runs (mean ± s.e. over seeds)
{table(metrics)}
"""
    write_summary(out, "docloc", "docloc — progressive evidence localisation as a JKO flow (reconstruction)",
                  claims, body, cfg, inputs)
