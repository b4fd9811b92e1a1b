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

    # ---------------------------------------------------------------- claims (claims.py, core.verdict)
    from paperflow.unlearning import claims as C

    cc = p["claims"]
    n_prompts = len(M["full"][seeds[0]]["leak"].get(hd, {}).get(hj, {}).get("c", []))
    ns = len(seeds)
    sample = f"{ns} seed{'s' if ns != 1 else ''} × {n_prompts} forget prompts × {n} samples"
    greedy_sample = f"{ns} seed{'s' if ns != 1 else ''} × greedy on forget + retain prompts"
    claims = []

    def per(m, key):
        return [g(m, s, key) for s in seeds]

    def lk(m, k):
        return [leak(m, s, k=k) for s in seeds]

    v, est = C.reference(per("full", "forget_greedy_acc"), per("full", "retain_greedy_acc"),
                         per("retain", "retain_greedy_acc"), cc["reference"])
    claims.append(Claim.judged(
        f"Reference models reproduce their training facts (greedy acc > {cc['reference']['threshold']})",
        f"full: forget {fmt(per('full', 'forget_greedy_acc'))}, retain {fmt(per('full', 'retain_greedy_acc'))}; "
        f"retrain: retain {fmt(per('retain', 'retain_greedy_acc'))}, forget (never seen) "
        f"{fmt(per('retain', 'forget_greedy_acc'))}; min {est.fmt()}", v, sample=greedy_sample, source="spec"))
    v, est = C.original_leaks(lk("full", 1), cc["original_leaks"])
    claims.append(Claim.judged(
        f"The original (full) model leaks the forget facts (leak@1 > {cc['original_leaks']['threshold']})",
        f"leak@1 ({hd}) {est.fmt()}; greedy forget acc {fmt(per('full', 'forget_greedy_acc'))}", v, sample=sample,
        source="spec", paper="no number in the paper (authors' artifacts: Original leak@1 0.287, spec §10)"))
    kg = cc["greedy_gap"]["k"] if cc["greedy_gap"]["k"] in ks else km
    for m in p["methods"]:
        v, est = C.greedy_gap(per(m, "forget_greedy_acc"), per("retain", "forget_greedy_acc"), lk(m, kg),
                              lk("retain", kg), p["greedy_margin"], cc["greedy_gap"])
        claims.append(Claim.judged(
            f"{m}: greedy looks forgotten (acc ≤ retrain + {p['greedy_margin']}) but sampling leaks: "
            f"leak@{kg} ({hd}) − retrain's > {cc['greedy_gap']['threshold']}",
            f"greedy {fmt(per(m, 'forget_greedy_acc'))} vs retrain {fmt(per('retain', 'forget_greedy_acc'))}; "
            f"leak@{kg} {fmt(lk(m, kg))} vs retrain {fmt(lk('retain', kg))}; Δ {est.fmt() if est.n else 'n/a'}",
            v, sample=sample, paper="no number in the paper (authors' artifacts, T=p=1, k=128: NPO 0.611, GradDiff "
                                    "0.853, retrain 0.611; spec §10)"))
    for m in p["methods"]:
        v, est = C.sampling_excess(per(m, "forget_greedy_acc"), lk(m, n), per("retain", "forget_greedy_acc"),
                                   lk("retain", n), cc["sampling_excess"])
        claims.append(Claim.judged(
            f"{m}: sampling reveals more than greedy beyond the retrain floor: (leak@{n} − greedy) − retrain's "
            f"> {cc['sampling_excess']['threshold']} (replaces 'leak@k grows with k', which cannot fail)",
            f"{m}: greedy {fmt(per(m, 'forget_greedy_acc'))}, leak@{n} {fmt(lk(m, n))}; retrain: greedy "
            f"{fmt(per('retain', 'forget_greedy_acc'))}, leak@{n} {fmt(lk('retain', n))}; excess "
            f"{est.fmt() if est.n else 'n/a'}", v, sample=sample))
    kr = cc["rule"]["k"] if cc["rule"]["k"] in ks else km
    for b in p["rule"]["bases"]:
        rm, cm = f"rule_{b}", f"control_{b}"
        if rm not in models:
            continue
        ctrl = lk(cm, kr) if cm in models else None
        v, est = C.rule_vs_control(lk(rm, kr), ctrl, lk(b, kr), lk("retain", kr), per(rm, "retain_greedy_acc"),
                                   cc["rule"])
        ctrl_txt = (f"control {fmt(ctrl)} (utility {fmt(per(cm, 'retain_greedy_acc'))}); control − RULE "
                    f"{est.fmt() if est.n else 'n/a'}") if ctrl is not None else "control not run"
        claims.append(Claim.judged(
            f"RULE-{b} [recon] lowers leak@{kr} ({hd}) below its gold-only control (same steps on gold pairs), "
            f"to ≤ retrain + {cc['rule']['retrain_margin']}, with utility > {cc['rule']['utility_threshold']}",
            f"RULE-{b} leak@{kr} {fmt(lk(rm, kr))} (utility {fmt(per(rm, 'retain_greedy_acc'))}); {ctrl_txt}; "
            f"base {b} {fmt(lk(b, kr))}; retrain {fmt(lk('retain', kr))}", v, sample=sample, source="recon",
            paper="no number in the paper (authors' artifacts, k=128: RULE-NPO 0.127 vs NPO 0.611, retrain 0.611; "
                  "no control reported)"))
    claims.append(Claim.judged("MUSE / WMDP results", "not run",
                               C.not_run("MUSE / WMDP leak@k code is not public (spec §1)"), sample="—"))
    body = f"""
Tier: **{p['run_name']}** (model: {p['model_kind']}, data: {p['data_source']}; prompts: `{p['prompt_field']}`).
Decoders: {', '.join(decs)} (top-k set explicitly); n = {n} samples per forget prompt; headline judge `{hj}`
(ROUGE-L recall gate, then the judge); seeds {seeds}. RULE is a **reconstruction** (spec §8): its objective,
budget and schedule were not available; models marked [recon]. Unlearning stops at the first greedy check
where forget accuracy ≤ retrain's + {p['greedy_margin']} (greedy-calibrated, as methods tuned on greedy metrics).

Verdicts come from `paperflow.core.verdict` with the thresholds of `unlearning.claims` (config); effects are
paired across seeds (t CI), so with fewer seeds than a claim's `min_n` it is "not testable at this scale".
RULE's verdict requires beating its gold-only control (same number of steps on gold pairs only); a base or
control that does not leak at all leaves nothing to remove and is "not testable". "leak@k grows with k" is no
longer a claim: the estimator is non-decreasing in k by construction, so it could not fail.

![leak@k curves](leak_curves.png)

{tables_md}
"""
    write_summary(out_dir / "summary.md", "unlearning", "Leak@k: unlearning does not make LLMs forget under sampling",
                  claims, body, config=p, inputs=inputs)
