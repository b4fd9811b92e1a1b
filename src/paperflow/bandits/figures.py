"""Figures of the bandits study, drawn from metrics.json only."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.plotting import band, save_figure, subplots

FIGURES = ("regret_curves.png", "updates_vs_T.png", "runtime.png", "budget.png", "glm.png")


def _rows(metrics: Mapping[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [r for r in metrics["rows"] if all(r[k] == v for k, v in match.items())]


def regret_curves(metrics: Mapping[str, Any], path: Path) -> None:
    main = _rows(metrics, exp="main")
    regimes = sorted({r["regime"] for r in main})
    betas = sorted({r["beta"] for r in main})
    Tmax = max(r["T"] for r in main)
    fig, axes = subplots(len(regimes), len(betas))
    for i, reg in enumerate(regimes):
        for j, beta in enumerate(betas):
            ax = axes[i][j]
            for r in _rows(metrics, exp="main", regime=reg, beta=beta, T=Tmax):
                band(ax, np.asarray(r["regret_t"]), np.asarray(r["regret_curves"]), label=r["variant"])
            ax.set(title=f"{reg} (K={r['K']}, d={r['d']}), β={beta:g}, T={Tmax}", xlabel="t", ylabel="cumulative regret")
            ax.set_xscale("log")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, path)


def updates_vs_T(metrics: Mapping[str, Any], path: Path) -> None:
    main = _rows(metrics, exp="main")
    regimes = sorted({r["regime"] for r in main})
    beta = sorted({r["beta"] for r in main})[-1]
    fig, axes = subplots(1, len(regimes))
    for i, reg in enumerate(regimes):
        ax = axes[0][i]
        for v in sorted({r["variant"] for r in main}):
            rows = sorted(_rows(metrics, exp="main", regime=reg, variant=v, beta=beta), key=lambda r: r["T"])
            ax.plot([r["T"] for r in rows], [np.mean(r["n_updates"]) for r in rows], "o-", label=v)
        ax.set(xscale="log", yscale="log", title=f"{reg}: parameter updates (from update logs)", xlabel="T",
               ylabel="used updates")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, path)


def runtime(metrics: Mapping[str, Any], path: Path) -> None:
    main = _rows(metrics, exp="main")
    regimes = sorted({r["regime"] for r in main})
    Tmax = max(r["T"] for r in main)
    beta = sorted({r["beta"] for r in main})[-1]
    fig, axes = subplots(1, len(regimes))
    for i, reg in enumerate(regimes):
        rows = _rows(metrics, exp="main", regime=reg, T=Tmax, beta=beta)
        ax = axes[0][i]
        ax.bar([r["variant"] for r in rows], [1e6 * r["runtime_per_round_s_mean"] for r in rows],
               yerr=[1e6 * r["runtime_per_round_s_se"] for r in rows])
        ax.set(title=f"{reg}: decision+update time, T={Tmax}", ylabel="µs per round")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    save_figure(fig, path)


def budget(metrics: Mapping[str, Any], path: Path) -> None:
    fig, axes = subplots(1, 1)
    ax = axes[0][0]
    rows = _rows(metrics, exp="budget")
    for fam, marker in (("blce", "o-"), ("rs_oful", "s-")):
        fr = sorted((r for r in rows if r["algo"] == fam), key=lambda r: np.mean(r["n_updates"]))
        if fr:
            ax.errorbar([np.mean(r["n_updates"]) for r in fr], [r["final_regret_mean"] for r in fr],
                        yerr=[r["final_regret_se"] for r in fr], fmt=marker, label=fam)
            for r in fr:
                ax.annotate(r["variant"].split("-")[1], (np.mean(r["n_updates"]), r["final_regret_mean"]), fontsize=7)
    if rows:
        lin = _rows(metrics, exp="main", regime=rows[0]["regime"], variant="linucb", T=rows[0]["T"], beta=rows[0]["beta"])
        for r in lin:
            ax.errorbar([np.mean(r["n_updates"])], [r["final_regret_mean"]], yerr=[r["final_regret_se"]], fmt="k^",
                        label="linucb")
        ax.set(xscale="log", title=f"regret vs update budget ({rows[0]['regime']}, T={rows[0]['T']})",
               xlabel="used parameter updates", ylabel="final regret")
        ax.legend(fontsize=7)
    save_figure(fig, path)


def glm(metrics: Mapping[str, Any], path: Path) -> None:
    fig, axes = subplots(1, 1)
    ax = axes[0][0]
    for r in _rows(metrics, exp="glm"):
        band(ax, np.asarray(r["regret_t"]), np.asarray(r["regret_curves"]), label=r["variant"])
        ax.set(title=f"logistic rewards (K={r['K']}, d={r['d']}, T={r['T']})", xlabel="t", ylabel="regret (μ units)",
               xscale="log")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def make_all(metrics: Mapping[str, Any], outdir: str | Path) -> list[Path]:
    outdir = Path(outdir)
    fns = {"regret_curves.png": regret_curves, "updates_vs_T.png": updates_vs_T, "runtime.png": runtime,
           "budget.png": budget, "glm.png": glm}
    paths = []
    for name in FIGURES:
        fns[name](metrics, outdir / name)
        paths.append(outdir / name)
    return paths
