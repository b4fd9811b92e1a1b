"""Figure: the pruning curve — test MAE and kept-token precision vs keep ratio, for the trained (d) arms
and the test-time pruning controls of the keep = 1.0 model (mean ± s.e. over seeds)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.consmsa.plan import CONTROLS, REFERENCE
from paperflow.consmsa.report import per_seed
from paperflow.core.plotting import save_figure, subplots

FIGURES = ("pruning_curve.png",)


def _errbar(ax: Any, xs: list[float], ys: list[list[float]], label: str, **kw: Any) -> None:
    pts = [(x, np.nanmean(y), (np.nanstd(y, ddof=1) / np.sqrt(len(y)) if len(y) > 1 else 0.0))
           for x, y in zip(xs, ys) if y and not np.all(np.isnan(y))]
    if pts:
        x, m, se = map(np.array, zip(*pts))
        ax.errorbar(x, m, yerr=se, label=label, capsize=2, marker="o", ms=3, **kw)


def pruning_curve(metrics: Mapping[str, Any], path: Path) -> None:
    fig, axes = subplots(1, 2, w=5.0, h=3.6)
    trained = sorted(((v, m["seeds"]) for v, m in metrics["variants"].items() if v.startswith("full_k")),
                     key=lambda t: -float(t[0][len("full_k"):]))
    for j, key in enumerate(("mae", "kept_precision")):
        ax = axes[0, j]
        xs = [float(v[len("full_k"):]) for v, _ in trained]
        _errbar(ax, xs, [per_seed(metrics, v, key) for v, _ in trained], "(d) trained at ρ", color="k", lw=2)
        ref = metrics["variants"].get(REFERENCE)
        if ref:
            ctl = next(iter(ref["seeds"].values()))["controls"]
            keeps = sorted({float(k.split("@")[1]) for k in ctl}, reverse=True)
            for sname in [c for c in CONTROLS if any(k.startswith(f"{c}@") for k in ctl)]:
                ys = [per_seed(metrics, REFERENCE, key, control=f"{sname}@{k:g}") for k in keeps]
                if key == "mae":  # every score prunes nothing at keep = 1.0
                    xs_c, ys = [1.0, *keeps], [per_seed(metrics, REFERENCE, "mae"), *ys]
                else:
                    xs_c = keeps
                _errbar(ax, xs_c, ys, f"test-time: {sname}", ls="--", lw=1)
        ax.set_xscale("log")
        ticks = sorted({1.0, *(float(v[len("full_k"):]) for v, _ in trained)}, reverse=True)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("keep ratio ρ (per modality)")
        ax.set_ylabel({"mae": "test MAE", "kept_precision": "kept-token precision"}[key])
        ax.invert_xaxis()
    axes[0, 0].set_title("MAE vs keep (±1 s.e. over seeds)", fontsize=9)
    axes[0, 1].set_title("informative+redundant share of kept", fontsize=9)
    axes[0, 1].legend(fontsize=6)
    save_figure(fig, path)


def make_all(metrics: Mapping[str, Any], outdir: str | Path) -> list[Path]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    p = outdir / FIGURES[0]
    pruning_curve(metrics, p)
    return [p]
