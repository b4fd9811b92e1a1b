"""Figures: SOT vs slow-call cost for every policy, with SR and slow calls per episode beside it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

FIGURES = ["sot_vs_cost.png"]


def make_all(metrics: Mapping[str, Any], outdir: str | Path) -> list[Path]:
    from paperflow.core.plotting import save_figure, subplots
    from paperflow.hydra_nav.report import name, ordered

    outdir = Path(outdir)
    fig, axes = subplots(1, 2, w=5.0)
    ax = axes[0, 0]
    for p in ordered(list(metrics["curve"])):
        pts = metrics["curve"][p]
        xs = sorted(pts, key=float)
        x = [float(k) for k in xs]
        y = [pts[k] for k in xs]
        if p == "irft":
            ax.plot(x, y, "k*", ms=12, label=name(p) + " (trained per C)")
        else:
            ax.plot(x, y, "o-", label=name(p))
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("slow-call cost C_slow (time units)")
    ax.set_ylabel("SOT")
    ax.set_title(f"SOT vs slow-call cost ({metrics['n_houses']} test houses)")
    ax.legend(fontsize=7)
    ax2 = axes[0, 1]
    cost = metrics["costs"][0]
    for p in ordered(list(metrics["per_policy"])):
        m = metrics["per_policy"][p][cost]["mean"]
        ax2.scatter(m["calls_per_episode"], m["sr"], label=name(p), marker="*" if p == "irft" else "o", s=60)
    ax2.set_xscale("symlog", linthresh=1.0)
    ax2.set_xlabel(f"slow calls per episode (C={cost})")
    ax2.set_ylabel("SR")
    ax2.set_title("SR vs slow calls")
    ax2.legend(fontsize=7)
    return [save_figure(fig, outdir / FIGURES[0])]
