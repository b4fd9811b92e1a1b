"""Figures from metrics.json: drift by step (the primary diagnostic), the decoding grid, visual attention."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.plotting import save_figure, subplots


def _seed_mean(by_seed: Mapping[str, Any], get: Any) -> np.ndarray:
    rows = [np.asarray([np.nan if v is None else v for v in get(r)], float) for r in by_seed.values()]
    n = min(len(r) for r in rows)
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.stack([r[:n] for r in rows]), axis=0) if n else np.zeros(0)


def drift(metrics: Mapping[str, Any], out: Path) -> Path:
    runs = metrics["runs"]
    fig, axes = subplots(1, 2, w=5.0)
    for cond, arms in runs.items():
        if "base" not in arms:
            continue
        y = _seed_mean(arms["base"], lambda r: r["drift"]["cos_by_step"])
        x = np.linspace(0, 1, len(y)) if len(y) > 1 else np.zeros(len(y))
        axes[0, 0].plot(x, y, marker=".", label=cond)
        ys = _seed_mean(arms["base"], lambda r: r["drift"]["cos_by_slot"])
        axes[0, 1].plot(np.arange(len(ys)), ys, label=cond)
    for ax, xl in zip(axes[0], ("decoding progress (step / steps)", "answer slot")):
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel(xl)
        ax.set_ylabel("cos(Uᵀ(h − μ), u), masked slots")
        ax.legend(fontsize=7)
    axes[0, 0].set_title("cos to the MPS prior by step (baseline decoding)")
    axes[0, 1].set_title("by slot (mean over steps)")
    return save_figure(fig, out)


def grid(metrics: Mapping[str, Any], out: Path) -> Path:
    runs = metrics["runs"]
    conds = list(runs)
    fig, axes = subplots(len(conds), 1, w=11.0, h=2.6)
    for ax, cond in zip(axes[:, 0], conds):
        arms = list(runs[cond])
        dup = [np.mean([r["summary"]["dup_rate"] for r in runs[cond][a].values()]) for a in arms]
        f1 = [np.mean([r["summary"]["f1"] for r in runs[cond][a].values()]) for a in arms]
        x = np.arange(len(arms))
        ax.bar(x - 0.2, dup, 0.4, label="duplicate rate")
        ax.bar(x + 0.2, f1, 0.4, label="object F1")
        ax.set_xticks(x, arms, rotation=30, fontsize=7, ha="right")
        ax.set_title(cond, fontsize=9)
        ax.set_ylim(0, 1)
    axes[0, 0].legend(fontsize=7)
    return save_figure(fig, out)


def attention(metrics: Mapping[str, Any], out: Path) -> Path:
    runs = metrics["runs"]
    fig, axes = subplots(1, 1, w=6.0)
    ax = axes[0, 0]
    for cond, arms in runs.items():
        for arm, by_seed in arms.items():
            if not any("attention" in r for r in by_seed.values()) or not (
                    arm == "base" or arm.startswith("mrs") or arm.startswith("offspec")):
                continue
            y = _seed_mean(by_seed, lambda r: np.asarray(r["attention"]["visual_by_layer_step"]).mean(axis=0))
            ax.plot(np.arange(len(y)), y, label=f"{cond}/{arm}", lw=1)
    ax.set_xlabel("decoding step")
    ax.set_ylabel("attention mass on visual keys (masked queries)")
    ax.legend(fontsize=6)
    return save_figure(fig, out)


def attention_by_distance(metrics: Mapping[str, Any], out: Path) -> Path:
    """Attention mass from masked answer queries by |query − key| bin (mean over layers, steps, items, seeds):
    onto all keys (solid) and onto still-masked keys (dashed); base and MRS arms."""
    runs = metrics["runs"]
    fig, axes = subplots(1, 1, w=6.0)
    ax = axes[0, 0]
    edges: list[int] = []
    for cond, arms in runs.items():
        for arm, by_seed in arms.items():
            if not (arm == "base" or arm.startswith("mrs")) or not all(
                    "by_distance" in r.get("attention", {}) for r in by_seed.values()):
                continue
            bd = [r["attention"]["by_distance"] for r in by_seed.values()]
            if len(bd[0]["bin_left_edges"]) > len(edges):  # conditions differ in length: label the longest
                edges = bd[0]["bin_left_edges"]
            y = np.mean([np.mean(b["all_keys_by_layer"], axis=0) for b in bd], axis=0)
            ym = np.mean([np.mean(b["masked_keys_by_layer"], axis=0) for b in bd], axis=0)
            line, = ax.plot(np.arange(len(y)), y, marker=".", lw=1, label=f"{cond}/{arm}")
            ax.plot(np.arange(len(ym)), ym, ls="--", lw=1, color=line.get_color())
    if edges:
        ax.set_xticks(np.arange(len(edges)), [f"{e}+" if i == len(edges) - 1 else
                                              (str(e) if edges[i + 1] - e == 1 else f"{e}–{edges[i + 1] - 1}")
                                              for i, e in enumerate(edges)], fontsize=7, rotation=30)
        ax.legend(fontsize=6)
    ax.set_xlabel("|query − key| (positions)")
    ax.set_ylabel("attention mass (solid: all keys, dashed: masked keys)")
    return save_figure(fig, out)


def make_all(metrics: Mapping[str, Any], rp: Mapping[str, Any], outdir: Path) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    return [drift(metrics, outdir / "drift_by_step.png"), grid(metrics, outdir / "decoding_grid.png"),
            attention(metrics, outdir / "visual_attention.png"),
            attention_by_distance(metrics, outdir / "attention_by_distance.png")]
