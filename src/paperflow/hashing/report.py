"""Aggregate every run's evaluation into metrics.json, mAP-vs-noise figures and summary.md."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import Stage, read_json, write_json
from paperflow.core.report import Claim, write_summary

BASE4 = ("plain", "small_loss", "label_smooth", "rfcmh")
DIRS = ("i2t", "t2i")


def _ms(v: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(v, float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def collect(evals: Sequence[str | Path], selection: str) -> dict[tuple, dict[str, list[float]]]:
    """(dataset, method, bits, mode, rate) -> {'i2t': [per seed], 't2i': [...], 'mean': [...], ...}."""
    out: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for f in evals:
        e = read_json(f)
        tp = e["train_params"]
        key = (Path(f).parent.name, tp["method"], tp["bits"], tp["mode"], float(tp["rate"]))
        s = e["selections"][selection]
        for k in ("i2t", "t2i", "mean"):
            out[key][k].append(s[k])
        out[key]["epoch"].append(s["epoch"])
        out[key]["seed"].append(tp["seed"])
        auc = e.get("diagnostics", {}).get("w_auroc_clean_mean_after_warmup")
        if auc is not None:
            out[key]["w_auroc"].append(auc)
        nf = e.get("diagnostics", {}).get("small_loss_noisy_frac_in_clean_last")
        if nf is not None:
            out[key]["sl_noisy_in_clean"].append(nf)
    return out


def build_report(prm: Mapping[str, Any], evals: Sequence[str | Path], sidecars: Sequence[str | Path], outdir: Path) -> None:
    from paperflow.core.plotting import band, save_figure, subplots

    sel = prm["primary_selection"]
    res = {s: collect(evals, s) for s in prm["selections"]}
    R = res[sel]
    datasets = sorted({k[0] for k in R})
    methods = [m for m in ("plain", "small_loss", "label_smooth", "rfcmh", "rfcmh_paper") if any(k[1] == m for k in R)]
    bits_all = sorted({k[2] for k in R})
    sym_rates = sorted({k[4] for k in R if k[3] == "sym"})
    asym_rates = sorted({k[4] for k in R if k[3] == "asym"})
    noisy_sym = [r for r in sym_rates if r > 0]
    rmax = max(noisy_sym) if noisy_sym else None

    def get(ds: str, m: str, b: int, mode: str, r: float, d: str, res_: Any = None) -> list[float]:
        return list((res_ or R).get((ds, m, b, mode, r), {}).get(d, []))

    # ---- metrics.json
    table = []
    for s, Rs in res.items():
        for (ds, m, b, mode, r), v in sorted(Rs.items()):
            row = {"selection": s, "dataset": ds, "method": m, "bits": b, "mode": mode, "rate": r, "n_seeds": len(v["mean"])}
            for d in ("i2t", "t2i", "mean"):
                row[f"{d}_mean"], row[f"{d}_std"] = _ms(v[d])
                row[f"{d}_per_seed"] = v[d]
            row["selected_epochs"] = v["epoch"]
            if v.get("w_auroc"):
                row["w_auroc_mean"] = float(np.mean(v["w_auroc"]))
            if v.get("sl_noisy_in_clean"):
                row["small_loss_noisy_frac_in_clean"] = float(np.mean(v["sl_noisy_in_clean"]))
            table.append(row)
    derived = []
    for ds in datasets:
        for m in methods:
            for b in bits_all:
                for d in DIRS:
                    c = get(ds, m, b, "sym", 0.0, d)
                    if not c:
                        continue
                    c0 = float(np.mean(c))
                    pts = {r: float(np.mean(get(ds, m, b, "sym", r, d))) for r in noisy_sym if get(ds, m, b, "sym", r, d)}
                    row = {"dataset": ds, "method": m, "bits": b, "direction": d, "clean": c0,
                           "drop": {str(r): c0 - v for r, v in pts.items()},
                           "retention": {str(r): v / c0 for r, v in pts.items()}}
                    if len(pts) >= 2:
                        xs = sorted(pts)
                        row["area_noisy"] = float(np.trapezoid([pts[x] for x in xs], xs))
                    derived.append(row)
    noise_stats = []
    for f in sidecars:
        s = read_json(f)
        noise_stats.append({"file": Path(f).name, "requested_rate": s["requested_rate"], "n": s["n"],
                            "n_changed": s["n_changed"], "realized_rate": s["realized_rate"], "mode": s["mode"]})

    metrics_path = outdir / "metrics.json"
    figs: list[Path] = []
    with Stage("hashing.report", config=dict(prm), outputs=[metrics_path], inputs=list(evals)) as st:
        write_json(metrics_path, {"primary_selection": sel, "runs_table": table, "derived": derived,
                                  "noise_records": noise_stats})
        st.metrics["n_evals"] = len(evals)
    # ---- figures: mAP vs symmetric noise rate, per code length (rows) and direction (cols)
    for ds in datasets:
        for s in prm["selections"]:
            fig, axes = subplots(len(bits_all), 2)
            for i, b in enumerate(bits_all):
                for j, d in enumerate(DIRS):
                    ax = axes[i][j]
                    for m in methods:
                        xs = [r for r in sym_rates if get(ds, m, b, "sym", r, d, res[s])]
                        if not xs:
                            continue
                        n = min(len(get(ds, m, b, "sym", r, d, res[s])) for r in xs)
                        curves = np.array([[get(ds, m, b, "sym", r, d, res[s])[k] for r in xs] for k in range(n)])
                        band(ax, np.array(xs), curves, label=m, marker="o")
                    ax.set_title(f"{ds} {d.upper()} {b} bits ({s})")
                    ax.set_xlabel("symmetric noise rate")
                    ax.set_ylabel("mAP@all")
                    ax.grid(alpha=0.3)
            by_label = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels())}
            axes[0][0].legend(by_label.values(), by_label.keys(), fontsize=7)  # every method, from any panel
            p = outdir / f"map_vs_noise_{ds}_{s}.png"
            save_figure(fig, p)
            figs.append(p)

    claims = _claims(R, datasets, methods, bits_all, noisy_sym, asym_rates, rmax, noise_stats, get)
    body = _body(R, res, datasets, methods, bits_all, sym_rates, asym_rates, sel, figs, get)
    write_summary(outdir / "summary.md", "hashing", "RFCMH: robust cross-modal hashing with noisy labels",
                  claims, body, config=dict(prm), inputs=[metrics_path])


def _claims(R: Any, datasets: list[str], methods: list[str], bits_all: list[int], noisy_sym: list[float],
            asym_rates: list[float], rmax: float | None, noise_stats: list[dict[str, Any]], get: Any) -> list[Claim]:
    claims: list[Claim] = []
    base = [m for m in BASE4 if m in methods]
    ds = datasets[0]
    if rmax is not None and "rfcmh" in base and len(base) > 1:
        wins, cells, parts = 0, 0, []
        for b in bits_all:
            for d in DIRS:
                drops = {m: float(np.mean(get(ds, m, b, "sym", 0.0, d))) - float(np.mean(get(ds, m, b, "sym", rmax, d)))
                         for m in base if get(ds, m, b, "sym", 0.0, d) and get(ds, m, b, "sym", rmax, d)}
                if "rfcmh" not in drops:
                    continue
                cells += 1
                best = min(drops, key=drops.get)
                wins += best == "rfcmh"
                parts.append(f"{b}b {d.upper()}: rfcmh {drops['rfcmh']:.3f} vs " +
                             ", ".join(f"{m} {v:.3f}" for m, v in drops.items() if m != "rfcmh"))
        verdict = "held" if wins == cells and cells else ("partly" if wins else "did not hold")
        claims.append(Claim(f"RFCMH degrades least as noise rises: smallest drop Δ({rmax:g}) = mAP(0) − mAP({rmax:g}) "
                            "among the four methods, both directions, every code length",
                            f"smallest in {wins}/{cells} cells; " + "; ".join(parts), verdict))
        rets = []
        for b in bits_all:
            for d in DIRS:
                c, n = get(ds, "rfcmh", b, "sym", 0.0, d), get(ds, "rfcmh", b, "sym", rmax, d)
                if c and n:
                    rets.append((b, d, float(np.mean(n)) / float(np.mean(c))))
        if rets:
            ok = sum(r >= 0.85 for *_, r in rets)
            claims.append(Claim(f"RFCMH keeps ≥ 85% of its clean mAP at noise {rmax:g} (paper ≈ 98% on XMedia)",
                                "; ".join(f"{b}b {d.upper()} {r:.1%}" for b, d, r in rets),
                                "held" if ok == len(rets) else ("partly" if ok else "did not hold"), source="spec"))
        hi = [r for r in noisy_sym if r >= 0.6]
        if hi:
            wins, cells, parts = 0, 0, []
            for r in hi:
                for b in bits_all:
                    for d in DIRS:
                        vals = {m: float(np.mean(get(ds, m, b, "sym", r, d))) for m in base if get(ds, m, b, "sym", r, d)}
                        if "rfcmh" in vals and len(vals) > 1:
                            cells += 1
                            wins += max(vals, key=vals.get) == "rfcmh"
                            parts.append(f"r{r:g} {b}b {d.upper()}: " + ", ".join(f"{m} {v:.3f}" for m, v in vals.items()))
            claims.append(Claim("At high noise (r ≥ 0.6) RFCMH has the best mAP of the four methods",
                                f"best in {wins}/{cells} cells; " + "; ".join(parts),
                                "held" if wins == cells and cells else ("partly" if wins else "did not hold"), source="spec"))
    if "plain" in base and len(base) > 1:
        parts, ok, cells = [], 0, 0
        for b in bits_all:
            for d in DIRS:
                ref = get(ds, "plain", b, "sym", 0.0, d)
                if not ref:
                    continue
                for m in base:
                    v = get(ds, m, b, "sym", 0.0, d)
                    if m == "plain" or not v:
                        continue
                    gap_ = float(np.mean(v)) - float(np.mean(ref))
                    cells += 1
                    ok += gap_ >= -0.03
                    parts.append(f"{b}b {d.upper()} {m} {gap_:+.3f}")
        if cells:
            claims.append(Claim("With clean labels every method is within 3 mAP points of the clean-label `plain` "
                                "reference (clean_oracle)", "; ".join(parts),
                                "held" if ok == cells else ("partly" if ok else "did not hold"), source="spec"))
    for ra in asym_rates:
        wins, cells, parts = 0, 0, []
        for b in bits_all:
            for d in DIRS:
                vals = {m: float(np.mean(get(ds, m, b, "asym", ra, d))) for m in base if get(ds, m, b, "asym", ra, d)}
                if "rfcmh" in vals and len(vals) > 1:
                    cells += 1
                    wins += vals["rfcmh"] >= max(vals.values()) - 1e-12
                    parts.append(f"{b}b {d.upper()}: " + ", ".join(f"{m} {v:.3f}" for m, v in vals.items()))
        if cells:
            claims.append(Claim(f"Under asymmetric noise {ra:g}, RFCMH is at least as good as the baselines",
                                f"best in {wins}/{cells} cells; " + "; ".join(parts),
                                "held" if wins == cells else ("partly" if wins else "did not hold")))
    aucs = []
    for r in noisy_sym:
        if r <= 0.6:
            for b in bits_all:
                v = R.get((ds, "rfcmh", b, "sym", r), {}).get("w_auroc", [])
                if v:
                    aucs.append((r, b, float(np.mean(v))))
    if aucs:
        ok = sum(a > 0.8 for *_, a in aucs)
        claims.append(Claim("After warm-up the reliability weight w separates clean from flipped pairs (AUROC > 0.8 at r ≤ 0.6)",
                            "; ".join(f"r{r:g} {b}b AUROC {a:.3f}" for r, b, a in aucs),
                            "held" if ok == len(aucs) else ("partly" if ok else "did not hold"), source="spec"))
    if noise_stats:
        bad = [s for s in noise_stats if s["n_changed"] != int(np.floor(s["n"] * s["requested_rate"] + 1e-9))
               and s["mode"] == "sym"]
        nsym = sum(s["mode"] == "sym" for s in noise_stats)
        claims.append(Claim("Every symmetric noise record flips exactly floor(N·r) rows (realised rate = floor(N r)/N)",
                            f"{nsym - len(bad)}/{nsym} symmetric records exact; asymmetric realised rates: " +
                            ", ".join(sorted({f"{s['requested_rate']:g}→{s['realized_rate']:.4f}" for s in noise_stats
                                              if s['mode'] == 'asym'})),
                            "held" if not bad else "did not hold", source="spec"))
    claims.append(Claim("Paper headline mAP (XMedia / INRIA-Websearch / XMediaNet, Table 1)",
                        "not run: the official feature packs are not available offline; this run uses the synthetic "
                        "XMedia-layout pack", "not testable at this scale"))
    return claims


def _body(R: Any, res: Any, datasets: list[str], methods: list[str], bits_all: list[int], sym_rates: list[float],
          asym_rates: list[float], sel: str, figs: list[Path], get: Any) -> str:
    lines = [f"Selection rule for every number below: `{sel}` (epoch and ε chosen on the validation split with "
             "*noisy* labels; test labels are read only by `evaluate`). mAP@all, mean ± std over noise seeds.",
             "Data: synthetic paired-modality pack in the XMedia `.mat` layout (spec §1.4), read by the same "
             "loader as the official packs. `plain` at r = 0 is the clean-label reference (`clean_oracle`).",
             "`rfcmh` follows the released code, `rfcmh_paper` the paper's equations; both are partly our "
             "reconstruction (see src/paperflow/hashing/README.md).", ""]
    settings = [("sym", r) for r in sym_rates] + [("asym", r) for r in asym_rates]
    for ds in datasets:
        for b in bits_all:
            for d in DIRS:
                lines.append(f"**{ds}, {b} bits, {d.upper()}**\n")
                lines.append("| method | " + " | ".join(f"{m}{r:g}" for m, r in settings) + " |")
                lines.append("|---" * (len(settings) + 1) + "|")
                for m in methods:
                    cells = []
                    for mode, r in settings:
                        v = get(ds, m, b, mode, r, d)
                        cells.append(f"{np.mean(v):.3f} ± {np.std(v, ddof=1) if len(v) > 1 else 0:.3f}" if v else "–")
                    lines.append(f"| {m} | " + " | ".join(cells) + " |")
                lines.append("")
    other = [s for s in res if s != sel]
    if other:
        lines.append("Other selection rules (mean of I2T and T2I, averaged over code lengths and seeds):\n")
        lines.append("| method | setting | " + " | ".join([sel] + other) + " |")
        lines.append("|---|---|" + "---|" * (1 + len(other)))
        for m in methods:
            for mode, r in settings:
                vals = []
                for s in [sel] + other:
                    v = [x for b in bits_all for x in get(datasets[0], m, b, mode, r, "mean", res[s])]
                    vals.append(f"{np.mean(v):.3f}" if v else "–")
                lines.append(f"| {m} | {mode}{r:g} | " + " | ".join(vals) + " |")
        lines.append("")
    lines.append("Figures: " + ", ".join(f"`{p.name}`" for p in figs))
    return "\n".join(lines)
