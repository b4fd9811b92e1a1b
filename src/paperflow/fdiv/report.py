"""Aggregate the fdiv runs into metrics.json / curves.csv and draw the figures (the claims: `claims.py`)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import Stage, read_json, write_json
from paperflow.fdiv import plan

GMM_FINAL = ("coverage", "mode_weight_l1", "kl_pq", "kl_qp", "hellinger", "l1_grid", "grad_norm_mean",
             "grad_norm_var", "nonfinite_steps")
HG_FINAL = ("l1", "kl_pq", "kl_qp", "modes_captured", "modes_discovered", "all_modes_captured_step")


def run_files(params: dict[str, Any], results: str | Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"identity": [f"{results}/fdiv/unit/identity.json"], "gmm": [], "gmm_density": [],
                                 "hypergrid": []}
    seeds = range(params["seeds"])
    if params["gmm"]["enabled"]:
        for m in params["gmm"]["models"]:
            for loss in params["losses"]:
                for s in seeds:
                    out["gmm"].append(plan.gmm_path(results, m, loss, s))
                    out["gmm_density"].append(plan.gmm_path(results, m, loss, s, "npz"))
    if params["hypergrid"]["enabled"]:
        out["hypergrid"] = [plan.hypergrid_path(results, loss, s) for loss in params["losses"] for s in seeds]
    return out


def stats(values: list[Any]) -> dict[str, Any]:
    v = np.array([np.nan if x is None else x for x in values], dtype=float)
    finite = v[np.isfinite(v)]
    n = len(finite)
    return {"mean": float(finite.mean()) if n else None,
            "se": float(finite.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0,
            "n_finite": int(n), "values": [None if not np.isfinite(x) else float(x) for x in v]}


def identity_summary(res: dict[str, Any]) -> dict[str, Any]:
    divs, losses = res["divergences"], res["losses"]
    ftb = [n for n, r in losses.items() if r["centre"] != "learned"]
    return {
        "all_pass": res["all_pass"],
        "t1_max_rel_err": max(d["t1_max_rel_err"] for d in divs.values()),
        "t1_pass_all": all(d["t1_pass"] for d in divs.values()),
        "correspondence_max_err": max(max(d["correspondence"].values()) for d in divs.values()),
        "t2_js_cosine_wrong_centre": divs["js"]["t2_cosine"],
        "t3_min_cosine": min((losses[n]["t3_cosine"] for n in ftb), default=None),
        "t5_max_l1_ftb": max((max(losses[n]["t5_l1"].values()) for n in ftb), default=None),
        "t5_l1_learned_logz": {n: r["t5_l1"] for n, r in losses.items() if r["centre"] == "learned"},
        "divergences": sorted(divs),
        "losses": sorted(losses),
    }


def aggregate(params: dict[str, Any], results: str | Path, out: str | Path, curves_out: str | Path) -> dict[str, Any]:
    files = run_files(params, results)
    inputs = [f for k in ("identity", "gmm", "hypergrid") for f in files[k]]
    with Stage("fdiv.aggregate", config=params, outputs=[out, curves_out], inputs=inputs) as st:
        metrics: dict[str, Any] = {"identity": identity_summary(read_json(files["identity"][0])), "gmm": {},
                                   "hypergrid": {}}
        rows: list[dict[str, Any]] = []
        runs: dict[tuple, list[dict[str, Any]]] = {}
        for f in files["gmm"]:
            r = read_json(f)
            for b, m in r["behaviours"].items():
                runs.setdefault(("gmm", r["model"], r["loss"], b), []).append(m)
                rows += [{"experiment": "gmm", "model": r["model"], "loss": r["loss"], "behaviour": b,
                          "seed": r["seed"], **c} for c in m["curve"]]
        for f in files["hypergrid"]:
            r = read_json(f)
            for b, m in r["behaviours"].items():
                runs.setdefault(("hypergrid", "mlp", r["loss"], b), []).append(m)
                rows += [{"experiment": "hypergrid", "model": "mlp", "loss": r["loss"], "behaviour": b,
                          "seed": r["seed"], **c} for c in m["curve"]]
        for (exp, model, loss, b), ms in runs.items():
            keys = GMM_FINAL if exp == "gmm" else HG_FINAL
            entry = {k: stats([m.get(k) for m in ms]) for k in keys if k in ms[0]}
            if exp == "gmm":
                metrics["gmm"].setdefault(model, {}).setdefault(loss, {})[b] = entry
            else:
                entry["n_modes"] = ms[0]["n_modes"]
                metrics["hypergrid"].setdefault(loss, {})[b] = entry
        write_json(out, metrics)
        cols = ["experiment", "model", "loss", "behaviour", "seed", "step"]
        extra = sorted({k for r in rows for k in r} - set(cols))
        Path(curves_out).parent.mkdir(parents=True, exist_ok=True)
        from paperflow.core.io import atomic_path

        with atomic_path(curves_out) as tmp:
            with open(tmp, "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=cols + extra)
                w.writeheader()
                w.writerows(rows)
        st.metrics["identity_all_pass"] = metrics["identity"]["all_pass"]
        st.metrics["n_curve_rows"] = len(rows)
    return metrics


# ------------------------------------------------------------------------------------------ figures
def _curves(results: str | Path) -> list[dict[str, str]]:
    with open(f"{results}/fdiv/curves.csv") as fh:
        return list(csv.DictReader(fh))


def _curve_matrix(rows: list[dict[str, str]], metric: str, **sel: str) -> tuple[np.ndarray, np.ndarray]:
    rs = [r for r in rows if all(r[k] == v for k, v in sel.items()) and r.get(metric, "") != ""]
    seeds = sorted({r["seed"] for r in rs})
    steps = sorted({int(r["step"]) for r in rs})
    mat = np.full((len(seeds), len(steps)), np.nan)
    for r in rs:
        mat[seeds.index(r["seed"]), steps.index(int(r["step"]))] = float(r[metric])
    return np.asarray(steps), mat


def figures(params: dict[str, Any], results: str | Path, outdir: str | Path) -> list[Path]:
    from paperflow.core.plotting import band, save_figure, subplots
    from paperflow.fdiv.gmm import Problem

    files = run_files(params, results)
    names = plan.figures(params)
    inputs = [f"{results}/fdiv/metrics.json", f"{results}/fdiv/curves.csv"] + files["gmm_density"]
    outs = [f"{outdir}/{n}" for n in names]
    metrics = read_json(f"{results}/fdiv/metrics.json")
    rows = _curves(results)
    losses = params["losses"]
    with Stage("fdiv.figures", config=params, outputs=outs, inputs=inputs) as st:
        g = params["gmm"]
        if g["enabled"]:
            prob = Problem({**{k: g[k] for k in ("n_modes", "radius", "sigma", "weights", "grid", "extent")},
                            "log_z_offset": 0.0, "proposal_std": 1.0, "model": "tabular"})
            target = prob.grid_p.reshape(g["grid"], g["grid"]).numpy()
            ext = [-g["extent"], g["extent"], -g["extent"], g["extent"]]
            for fname, pick in (("gmm_densities_on.png", lambda bs: bs[0]),
                                ("gmm_densities_off.png", lambda bs: bs[1] if len(bs) > 1 else bs[0])):
                models = g["models"]
                fig, axes = subplots(len(models), len(losses) + 1, w=2.3, h=2.3)
                for i, m in enumerate(models):
                    b = pick(g["behaviours"][m])
                    axes[i][0].imshow(np.log10(target + 1e-12), origin="lower", extent=ext, vmin=-6, vmax=0)
                    axes[i][0].set_title("target" if i == 0 else "")
                    axes[i][0].set_ylabel(f"{m} ({b})")
                    for j, loss in enumerate(losses):
                        d = np.load(plan.gmm_path(results, m, loss, 0, "npz"))[b]
                        ax = axes[i][j + 1]
                        ax.imshow(np.log10(np.clip(d, 1e-12, None)), origin="lower", extent=ext, vmin=-6, vmax=0)
                        cov = metrics["gmm"][m][loss][b]["coverage"]["values"][0]
                        ax.set_title(f"{loss}: {cov:.0f} modes", fontsize=8)
                for ax in np.ravel(axes):
                    ax.set_xticks([])
                    ax.set_yticks([])
                fig.suptitle(f"learned densities (log10 mass per cell), seed 0, behaviour shown per row")
                save_figure(fig, f"{outdir}/{fname}")
        # mode coverage vs training
        panels = ([("gmm", m) for m in g["models"]] if g["enabled"] else []) + (
            [("hypergrid", "mlp")] if params["hypergrid"]["enabled"] else [])
        fig, axes = subplots(1, len(panels))
        for ax, (exp, m) in zip(axes[0], panels):
            metric = "coverage" if exp == "gmm" else "modes_captured"
            beh = g["behaviours"][m][0] if exp == "gmm" else params["hypergrid"]["behaviours"][0]
            for loss in losses:
                x, mat = _curve_matrix(rows, metric, experiment=exp, model=m, loss=loss, behaviour=beh)
                if mat.size:
                    band(ax, x, mat, loss)
            ax.set_title(f"{exp} {m} ({beh})", fontsize=9)
            ax.set_xlabel("step")
            ax.set_ylabel("modes covered" if exp == "gmm" else "modes captured (q >= p/2)")
        axes[0][0].legend(fontsize=7)
        save_figure(fig, f"{outdir}/coverage_vs_steps.png")
        # on- vs off-policy final L1
        groups = ([("gmm", "tabular", "l1_grid")] if g["enabled"] and "tabular" in g["models"] else []) + (
            [("hypergrid", None, "l1")] if params["hypergrid"]["enabled"] else [])
        fig, axes = subplots(1, max(1, len(groups)), w=5.5)
        for ax, (exp, m, metric) in zip(axes[0], groups):
            table = metrics["gmm"][m] if exp == "gmm" else metrics["hypergrid"]
            behs = g["behaviours"][m] if exp == "gmm" else params["hypergrid"]["behaviours"]
            width = 0.8 / len(behs)
            for k, b in enumerate(behs):
                means = [table[loss][b][metric]["mean"] or np.nan for loss in losses]
                ses = [table[loss][b][metric]["se"] for loss in losses]
                ax.bar(np.arange(len(losses)) + k * width, means, width, yerr=ses, label=b)
            ax.set_xticks(np.arange(len(losses)) + 0.4 - width / 2)
            ax.set_xticklabels(losses, fontsize=8)
            ax.set_ylabel(f"final {metric} (exact)")
            ax.set_title(f"{exp} {m or ''}: on- vs off-policy", fontsize=9)
            ax.legend(fontsize=7)
        save_figure(fig, f"{outdir}/on_vs_off.png")
        if params["hypergrid"]["enabled"]:
            behs = params["hypergrid"]["behaviours"]
            fig, axes = subplots(1, len(behs))
            for ax, b in zip(axes[0], behs):
                for loss in losses:
                    x, mat = _curve_matrix(rows, "l1", experiment="hypergrid", loss=loss, behaviour=b)
                    if mat.size:
                        band(ax, x, mat, loss)
                ax.set_yscale("log")
                ax.set_title(f"hypergrid, behaviour {b}", fontsize=9)
                ax.set_xlabel("step")
                ax.set_ylabel("exact L1(q, p)")
            axes[0][0].legend(fontsize=7)
            save_figure(fig, f"{outdir}/hypergrid_l1_vs_steps.png")
        st.metrics["figures"] = names
    return [Path(o) for o in outs]
