"""Study report: metrics.json, leak@k curves (PNG), the leak@k x decoding table with utility, summary.md.

Built only from the judge stage's metrics files and the model stages' manifests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import read_json, read_manifest, write_json, write_text
from paperflow.core.report import Claim, write_summary

LABELS = {"full": "Original (full)", "retain": "Retrain (retain only)"}


def label(model: str) -> str:
    if model in LABELS:
        return LABELS[model]
    if model.startswith("rule_"):
        return f"RULE-{model[5:]} [recon]"
    if model.startswith("control_"):
        return f"control: {model[8:]} + gold steps"
    return model


def _ms(vals) -> tuple[float, float]:
    v = np.asarray([x for x in vals if x is not None], dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0


def fmt(vals, digits: int = 2) -> str:
    m, se = _ms(vals)
    if np.isnan(m):
        return "n/a"
    return f"{m:.{digits}f}" if len(vals) == 1 else f"{m:.{digits}f} ± {se:.{digits}f}"


def k_mid(ks: list[int], n: int) -> int:
    return 32 if 32 in ks and 32 < n else max(k for k in ks if k <= max(1, n // 2))


def build_report(p: dict[str, Any], metrics_root: Path, models_root: Path, out_dir: Path) -> None:
    seeds, models, ks = p["seeds"], p["models"], p["ks"]
    hd, hj, decs = p["headline_decoder"], p["headline_judge"], p["decoders"]
    M: dict[str, dict[int, dict]] = {m: {} for m in models}
    man: dict[str, dict[int, dict]] = {m: {} for m in models}
    inputs = []
    for m in models:
        for s in seeds:
            f = Path(metrics_root) / f"seed{s}" / f"{m}.json"
            M[m][s] = read_json(f)
            inputs.append(f)
            md = Path(models_root) / f"seed{p['model_seeds'][m][str(s)]}" / m
            man[m][s] = read_manifest(md)["metrics"] if Path(str(md) + ".manifest.json").exists() else {}
    n = M["full"][seeds[0]]["n_samples"]
    ks = [k for k in ks if k <= n]
    km = k_mid(ks, n)

    def leak(m, s, dec=hd, judge=hj, k=1):
        return M[m][s]["leak"].get(dec, {}).get(judge, {}).get("leak", {}).get(str(k))

    def g(m, s, key):
        return M[m][s]["summary"].get(key)

    # ---------------------------------------------------------------- metrics.json
    agg: dict[str, Any] = {"ks": ks, "n_samples": n, "headline": {"decoder": hd, "judge": hj}, "models": {}}
    for m in models:
        entry: dict[str, Any] = {"label": label(m), "per_seed": {}, "mean": {}}
        for s in seeds:
            entry["per_seed"][s] = {"greedy": M[m][s]["summary"],
                                    "leak": {d: {j: v["leak"] for j, v in M[m][s]["leak"].get(d, {}).items()}
                                             for d in decs},
                                    "stage": man[m][s]}
        for d in decs:
            for j in p["judges"]:
                entry["mean"].setdefault(d, {})[j] = {str(k): _ms([leak(m, s, d, j, k) for s in seeds])[0] for k in ks}
        for key in ("forget_greedy_acc", "retain_greedy_acc", "forget_greedy_rougeL", "retain_greedy_rougeL"):
            entry["mean"][key] = _ms([g(m, s, key) for s in seeds])[0]
        agg["models"][m] = entry
    out_dir = Path(out_dir)
    write_json(out_dir / "metrics.json", agg)

    # ---------------------------------------------------------------- leak@k curves
    from paperflow.core.plotting import band, save_figure, subplots

    fig, axes = subplots(1, len(decs), w=5.2, h=4.0)
    for ax, d in zip(axes[0], decs):
        for i, m in enumerate(models):
            curves = np.array([[leak(m, s, d, hj, k) for k in ks] for s in seeds], dtype=float)
            style = {"color": "black", "lw": 2.5} if m == "retain" else {"color": f"C{i % 10}"}
            band(ax, np.array(ks), curves, label(m), marker="o", ms=3, **style)
            gl = np.mean([g(m, s, "forget_greedy_acc") for s in seeds])
            ax.plot([0.6], [gl], marker="*", ms=9, color=style["color"], ls="none")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k  (★ at left = greedy forget accuracy)")
        ax.set_ylabel(f"leak@k ({hj} judge)")
        ax.set_title(f"decoder {d}, n={n}, {len(seeds)} seed(s)")
        ax.set_ylim(-0.02, 1.02)
    axes[0][-1].legend(fontsize=6, loc="lower right")
    save_figure(fig, out_dir / "leak_curves.png")

    # ---------------------------------------------------------------- table
    tk = sorted({1, 8 if 8 in ks else ks[min(3, len(ks) - 1)], n} & set(ks) | {1, n})
    head = ["model", "greedy forget acc", "retain greedy acc (utility)", "retain ROUGE-L"]
    for d in decs:
        head += [f"{d} leak@{k}" for k in tk]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in models:
        row = [label(m), fmt([g(m, s, "forget_greedy_acc") for s in seeds]),
               fmt([g(m, s, "retain_greedy_acc") for s in seeds]), fmt([g(m, s, "retain_greedy_rougeL") for s in seeds])]
        for d in decs:
            row += [fmt([leak(m, s, d, hj, k) for s in seeds]) for k in tk]
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    # delta vs retrain at the headline decoder
    dl = ["| model | " + " | ".join(f"Δleak@{k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 1)]
    for m in models:
        if m == "retain":
            continue
        dl.append(f"| {label(m)} | " + " | ".join(
            fmt([leak(m, s, k=k) - leak("retain", s, k=k) for s in seeds]) for k in ks) + " |")
    # other judges (sensitivity)
    other = []
    for j in p["judges"]:
        if j == hj:
            continue
        other.append(f"\n### `{j}` judge, decoder {hd}: leak@1 / leak@{km} / leak@{n}\n")
        other.append("| model | leak@1 | leak@%d | leak@%d |\n|---|---|---|---|" % (km, n))
        for m in models:
            other.append(f"| {label(m)} | " + " | ".join(fmt([leak(m, s, hd, j, k) for s in seeds]) for k in (1, km, n)) + " |")
    tables_md = (f"## leak@k ({hj} judge, mean ± s.e. over seeds {seeds}) with utility\n\n{table}\n\n"
                 f"## Δleak@k vs retrain, decoder {hd}\n\n" + "\n".join(dl) + "\n" + "\n".join(other) + "\n")
    write_text(out_dir / "table.md", tables_md)

    # ---------------------------------------------------------------- claims
    claims = []
    full_l1 = [leak("full", s) for s in seeds]
    claims.append(Claim("The original (full) model leaks the forget facts (leak@1 high)",
                        f"leak@1 ({hd}) = {fmt(full_l1)}; greedy forget acc {fmt([g('full', s, 'forget_greedy_acc') for s in seeds])}",
                        "held" if np.mean(full_l1) >= 0.5 else "did not hold", "spec"))
    acc_ok = all(g(m, s, k) is not None and g(m, s, k) >= p["accept_acc"] for m, k in
                 (("full", "forget_greedy_acc"), ("full", "retain_greedy_acc"), ("retain", "retain_greedy_acc"))
                 for s in seeds)
    claims.append(Claim(f"Reference models reproduce their training facts (greedy acc ≥ {p['accept_acc']})",
                        f"full: forget {fmt([g('full', s, 'forget_greedy_acc') for s in seeds])}, retain "
                        f"{fmt([g('full', s, 'retain_greedy_acc') for s in seeds])}; retrain: retain "
                        f"{fmt([g('retain', s, 'retain_greedy_acc') for s in seeds])}, forget (never seen) "
                        f"{fmt([g('retain', s, 'forget_greedy_acc') for s in seeds])}", "held" if acc_ok else "did not hold",
                        "spec"))
    base_methods = [m for m in p["methods"]]
    gap_rows = []
    gap_any = False
    for m in base_methods:
        per = []
        for s in seeds:
            ok_g = g(m, s, "forget_greedy_acc") <= g("retain", s, "forget_greedy_acc") + p["greedy_margin"]
            ok_l = leak(m, s, k=km) >= 2 * leak("retain", s, k=km) and leak(m, s, k=km) > leak("retain", s, k=km) + 0.05
            per.append(ok_g and ok_l)
        gap_any |= all(per)
        gap_rows.append(f"{m}: greedy {fmt([g(m, s, 'forget_greedy_acc') for s in seeds])}, leak@{km} "
                        f"{fmt([leak(m, s, k=km) for s in seeds])} ({sum(per)}/{len(seeds)} seeds show the gap)")
    rl = fmt([leak("retain", s, k=km) for s in seeds])
    claims.append(Claim(f"Greedy looks forgotten but sampling leaks: a baseline's greedy acc ≤ retrain + {p['greedy_margin']} "
                        f"while leak@{km} ({hd}) ≥ 2× retrain's, in every seed",
                        f"retrain leak@{km} {rl}, greedy {fmt([g('retain', s, 'forget_greedy_acc') for s in seeds])}; "
                        + "; ".join(gap_rows), "held" if gap_any else "did not hold"))
    grow = []
    for m in models:
        l1, ln = _ms([leak(m, s, k=1) for s in seeds])[0], _ms([leak(m, s, k=n) for s in seeds])[0]
        grow.append((m, l1, ln))
    n_grow = sum(1 for _, a, b in grow if b > a + 1e-9)
    n_pos = sum(1 for _, a, b in grow if b > 0)
    t_ok = None
    if len(decs) >= 2:
        lo, hi = decs[0], hd if hd != decs[0] else decs[-1]
        t_ok = [(m, _ms([leak(m, s, lo, hj, km) for s in seeds])[0], _ms([leak(m, s, hi, hj, km) for s in seeds])[0])
                for m in models]
    t_txt = ""
    if t_ok:
        t_txt = (f"; leak@{km} at {decs[0]} ≤ at {hd} for {sum(1 for _, a, b in t_ok if a <= b + 1e-9)}/{len(t_ok)} models")
    claims.append(Claim("leak@k grows with k (for models that leak at all)",
                        f"leak@{n} > leak@1 for {n_grow}/{n_pos} models with any leak{t_txt}",
                        "held" if n_pos and n_grow == n_pos else ("partly" if n_grow else "did not hold")))
    for b in p["rule"]["bases"]:
        rm, cm = f"rule_{b}", f"control_{b}"
        if rm not in models:
            continue
        r_l = [leak(rm, s, k=km) for s in seeds]
        ret = [leak("retain", s, k=km) for s in seeds]
        util = [g(rm, s, "retain_greedy_acc") for s in seeds]
        ok = all(a <= c + 1e-9 for a, c in zip(r_l, ret)) and all(u >= 0.9 for u in util)
        ctrl = f"; control {fmt([leak(cm, s, k=km) for s in seeds])} (utility {fmt([g(cm, s, 'retain_greedy_acc') for s in seeds])})" \
            if cm in models else ""
        claims.append(Claim(f"RULE-{b} [recon] brings leak@{km} ({hd}) to ≤ retrain with retain greedy acc ≥ 0.9",
                            f"RULE-{b} leak@{km} {fmt(r_l)} vs base {b} {fmt([leak(b, s, k=km) for s in seeds])}, "
                            f"retrain {fmt(ret)}; RULE utility {fmt(util)}{ctrl}",
                            "held" if ok else ("partly" if np.mean(r_l) < np.mean([leak(b, s, k=km) for s in seeds])
                                               else "did not hold"), "recon"))
    claims.append(Claim("MUSE / WMDP results", "not run (their leak@k code is not public; spec §1)",
                        "not testable at this scale"))
    body = f"""
Tier: **{p['run_name']}** (model: {p['model_kind']}, data: {p['data_source']}; prompts: `{p['prompt_field']}`).
Decoders: {', '.join(decs)} (top-k set explicitly); n = {n} samples per forget prompt; headline judge `{hj}`
(ROUGE-L recall gate, then the judge); seeds {seeds}. RULE is a **reconstruction** (spec §8): its objective,
budget and schedule were not available; models marked [recon]. Unlearning stops at the first greedy check
where forget accuracy ≤ retrain's + {p['greedy_margin']} (greedy-calibrated, as methods tuned on greedy metrics).

![leak@k curves](leak_curves.png)

{tables_md}
"""
    write_summary(out_dir / "summary.md", "unlearning", "Leak@k: unlearning does not make LLMs forget under sampling",
                  claims, body, config=p, inputs=inputs)
