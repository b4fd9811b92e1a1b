"""The bandits study's summary: each claim from the spec, the number we measured, held or not."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.bandits.grid import default_M
from paperflow.core.report import Claim, write_summary

ELIM_FAMILY = ("blce", "blce_g", "batch_elim_g", "nonadaptive", "stale_ucb", "blce_thresh")


def _index(metrics: Mapping[str, Any]) -> dict[tuple, dict[str, Any]]:
    return {(r["exp"], r["regime"], r["variant"], r["T"], r["beta"]): r for r in metrics["rows"]}


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def claims(metrics: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[Claim]:
    rows = metrics["rows"]
    idx = _index(metrics)
    main = [r for r in rows if r["exp"] == "main"]
    regimes = sorted({r["regime"] for r in main})
    Ts = sorted({r["T"] for r in main})
    betas = sorted({r["beta"] for r in main})
    variants = {r["variant"] for r in main}
    out: list[Claim] = []

    # H1: exact update counts, from the policies' own logs
    bad = []
    for r in main:
        M = len(r["grid"]) if r["grid"] else None
        if r["algo"] in ELIM_FAMILY and any(n != M - 1 for n in r["n_updates"]):
            bad.append(f"{r['variant']}@{r['regime']},T={r['T']}")
        if r["algo"] == "linucb" and any(n != r["T"] - 1 for n in r["n_updates"]):
            bad.append(f"linucb@{r['regime']},T={r['T']}")
    blce_counts = {T: sorted({n for r in main if r["variant"] == "blce" and r["T"] == T for n in r["n_updates"]}) for T in Ts}
    rs_counts = {T: _fmt(np.mean([n for r in main if r["variant"] == "rs_oful" and r["T"] == T for n in r["n_updates"]]))
                 for T in Ts} if "rs_oful" in variants else {}
    out.append(Claim(
        "BLCE-family algorithms make exactly M−1 = ⌈log₂log₂T⌉ used parameter updates (O(log log T)); LinUCB T−1; "
        "RS-OFUL O(d log T)",
        f"blce updates per T {blce_counts} (M−1 = {[default_M(T) - 1 for T in Ts]}); rs_oful mean {rs_counts}; "
        f"violations: {bad or 'none'}",
        "held" if not bad else "did not hold", "spec H1"))

    # H3a: blce vs nonadaptive at equal M
    if {"blce", "nonadaptive"} <= variants:
        wins = [(idx[("main", g, "blce", T, b)]["final_regret_mean"] < idx[("main", g, "nonadaptive", T, b)]["final_regret_mean"])
                for g in regimes for T in Ts for b in betas]
        frac = float(np.mean(wins))
        out.append(Claim("BLCE beats the non-adaptive batched baseline at equal M in ≥ 80% of grid cells",
                         f"{sum(wins)}/{len(wins)} cells ({frac:.0%}) over regimes × T × β, {cfg['seeds']} seeds",
                         "held" if frac >= 0.8 else "did not hold", "spec H3"))
    # H3b: blce vs design-based baseline
    if {"blce", "batch_elim_g"} <= variants:
        ok, cells = 0, 0
        for g in regimes:
            for T in Ts:
                for b in betas:
                    a, d = idx[("main", g, "blce", T, b)], idx[("main", g, "batch_elim_g", T, b)]
                    cells += 1
                    ok += a["final_regret_mean"] <= d["final_regret_mean"] + 1.96 * np.hypot(a["final_regret_se"], d["final_regret_se"])
        out.append(Claim("BLCE's regret ≤ the design-based batched baseline's (or within its CI): the design step is unnecessary",
                         f"{ok}/{cells} cells with blce ≤ batch_elim_g + 1.96·s.e.",
                         "held" if ok == cells else ("partly" if ok >= cells / 2 else "did not hold"), "spec H3"))
    # H4: runtime
    Tmax = Ts[-1]
    b0 = betas[-1]
    for g in regimes:
        K = idx[("main", g, "blce", Tmax, b0)]["K"] if ("main", g, "blce", Tmax, b0) in idx else None
        if K is None:
            continue
        t_blce = idx[("main", g, "blce", Tmax, b0)]["runtime_per_round_s_mean"]
        if "linucb" in variants:
            t_lin = idx[("main", g, "linucb", Tmax, b0)]["runtime_per_round_s_mean"]
            ratio = t_blce / t_lin
            out.append(Claim(f"BLCE's per-round time ≤ 2× LinUCB's ({g}, K={K})",
                             f"{1e6 * t_blce:.0f} µs vs {1e6 * t_lin:.0f} µs per round = {ratio:.2f}× (T={Tmax}, β={b0:g})",
                             "held" if ratio <= 2 else "did not hold", "spec H4"))
        for other in ("batch_elim_g", "blce_g"):
            if other in variants and K >= 1000:
                t_o = idx[("main", g, other, Tmax, b0)]["runtime_per_round_s_mean"]
                ratio = t_o / t_blce
                out.append(Claim(f"{other} is ≥ 5× slower than BLCE at K ≥ 1000 (the design step is the bottleneck)",
                                 f"{1e6 * t_o:.0f} µs vs {1e6 * t_blce:.0f} µs per round = {ratio:.2f}× ({g}, K={K}, T={Tmax})",
                                 "held" if ratio >= 5 else "did not hold", "spec H4"))
    # H2 (full profile): regret ratio vs LinUCB and its trend in T — reported, judged only at paper scale
    if {"blce", "linucb"} <= variants and len(Ts) >= 2:
        for g in regimes:
            ratios = [idx[("main", g, "blce", T, b0)]["final_regret_mean"] / idx[("main", g, "linucb", T, b0)]["final_regret_mean"]
                      for T in Ts]
            slope = float(np.polyfit(np.log(Ts), np.log(ratios), 1)[0])
            out.append(Claim(f"R_T(blce)/R_T(linucb) does not grow with T (slope vs log T ≤ 0.1), {g}",
                             f"ratios {[_fmt(x) for x in ratios]} at T={Ts}; slope {slope:.2f} (β={b0:g})",
                             "not testable at this scale", "spec H2 (full profile only)"))
    # within-interval adaptivity (labelled variant, spec pilot)
    if {"stale_ucb", "linucb"} <= variants:
        g = regimes[0]
        r_s = idx[("main", g, "stale_ucb", Tmax, b0)]["final_regret_mean"]
        r_l = idx[("main", g, "linucb", Tmax, b0)]["final_regret_mean"]
        out.append(Claim("With within-interval adaptivity, M−1 updates cost about 2× LinUCB's regret "
                         "(labelled variant stale_ucb, not the paper's BLCE)",
                         f"stale_ucb {r_s:.0f} vs linucb {r_l:.0f} = {r_s / r_l:.2f}× ({g}, T={Tmax}, β={b0:g})",
                         "held" if r_s / r_l <= 3 else "did not hold", "spec pilot"))
    # GLM
    glm_rows = {r["variant"]: r for r in rows if r["exp"] == "glm"}
    if {"blce_glm", "glm_ucb_ons"} <= glm_rows.keys():
        a, o = glm_rows["blce_glm"], glm_rows["glm_ucb_ons"]
        ratio = a["final_regret_mean"] / o["final_regret_mean"]
        out.append(Claim("BLCE-GLM's regret is within 3× of per-round GLM-UCB (paper scale: T = 10⁵)",
                         f"{a['final_regret_mean']:.1f} ± {a['final_regret_se']:.1f} vs {o['final_regret_mean']:.1f} ± "
                         f"{o['final_regret_se']:.1f} = {ratio:.2f}× at T={a['T']}, K={a['K']}, d={a['d']}",
                         "held" if ratio <= 3 else "did not hold", "spec GLM"))
        out.append(Claim("BLCE-GLM makes O(log log T) MLE solves",
                         f"{a['stats'].get('mle_solves', float('nan')):.0f} solves, "
                         f"{a['stats'].get('newton_iters', float('nan')):.0f} Newton iterations at T={a['T']}",
                         "held" if a["stats"].get("mle_solves", 1e9) <= default_M(a["T"]) else "did not hold", "spec GLM"))
        if "rs_glm" in glm_rows:
            r = glm_rows["rs_glm"]
            ratio = r["runtime_per_round_s_mean"] / a["runtime_per_round_s_mean"]
            out.append(Claim("BLCE-GLM's runtime is ≥ 5× lower than RS-GLM's (spec: at K = 50)",
                             f"RS-GLM/BLCE-GLM time = {ratio:.2f}× (blce_glm {1e6 * a['runtime_per_round_s_mean']:.0f} vs "
                             f"rs_glm {1e6 * r['runtime_per_round_s_mean']:.0f} µs/round, K={a['K']}); RS-GLM "
                             f"{r['stats'].get('mle_solves', 0):.0f} MLE solves",
                             "held" if ratio >= 5 else "did not hold", "spec GLM"))
    return out


def _table(metrics: Mapping[str, Any]) -> str:
    lines = ["| exp | regime | algorithm | T | β | final regret (mean ± s.e.) | used updates | µs/round | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in metrics["rows"]:
        ups = sorted(set(r["n_updates"]))
        lines.append(f"| {r['exp']} | {r['regime']} (K={r['K']}, d={r['d']}) | {r['variant']} | {r['T']} | {r['beta']:g} | "
                     f"{r['final_regret_mean']:.1f} ± {r['final_regret_se']:.1f} | {ups if len(ups) > 1 else ups[0]} | "
                     f"{1e6 * r['runtime_per_round_s_mean']:.0f} | {len(r['seeds'])} |")
    return "\n".join(lines)


BODY = """
## Status of the method

No public code exists for this paper and only its abstract was available: **BLCE, BLCE-G, the
batched baselines and BLCE-GLM are reconstructions** (spec §3–§6). The within-interval rule, fresh
per-interval statistics, elimination over all frozen estimates vs the latest, and the BLCE-G design
are guesses, each a config switch. In `design: per_round` mode BLCE-G's decision rule coincides with
`batch_elim_g` (the reconstruction cannot distinguish them). `stale_ucb` and `blce_thresh` are
labelled variants, not the paper's algorithm. β is an absolute width from the config (no tuning on
evaluation seeds was done). Update counts come from each policy's own update log.

## Risks (spec §11)
1. Fidelity: every guessed piece is a config switch; results above are for this config only.
2. Tuning: theory-valued β is conservative; nothing was tuned on the seeds reported here.
3. Small T: with T ≤ 10⁴ and M ≈ 5 the first interval is pure exploration and dominates regret;
   regret-scaling slopes (H2) are judged at paper scale only.
4. Rank deficiency when few arms survive: designs work in the span of the surviving set
   (counts in `metrics.json` → `stats.rank_deficient_designs`).
5. Numerical drift: the Sherman–Morrison inverse is checked against an exact inverse at every grid
   point (max relative error in `stats.max_sm_rel_err`; a run fails above 1e-8).

## Figures
`regret_curves.png` (cumulative regret vs t, mean ± s.e. over seeds), `updates_vs_T.png`,
`runtime.png`, `budget.png` (regret vs update budget), `glm.png`.

## All cells
"""


def write(metrics: Mapping[str, Any], cfg: Mapping[str, Any], out: str | Path, inputs: list[str]) -> None:
    cl = claims(metrics, cfg)
    write_summary(out, "bandits", "BLCE / BLCE-G: linear contextual bandits with rare parameter updates (Yu & Oh, ICML 2026)",
                  cl, BODY + _table(metrics), config=cfg, inputs=inputs)
