"""Figures: score maps on test examples (pointing = the argmax cell) and the metrics per arm."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

FIGURES = ("heatmaps.png", "metrics_by_arm.png")
MAP_ARMS = ("A", "C", "D", "F")


def heatmaps(examples: Mapping[str, np.ndarray], meta: Mapping[str, Any], path: Path) -> Path:
    from paperflow.core.plotting import save_figure, subplots

    imgs, pos = examples["images"], examples["pos"].astype(bool)
    arms = [a for a in MAP_ARMS if f"{a}.S" in examples]
    cats = meta["categories"]
    n = min(6, len(imgs))
    fig, axes = subplots(n, 1 + max(1, len(arms)), w=1.8, h=1.9)
    axes = np.atleast_2d(axes)
    size = imgs.shape[1]
    for i in range(n):
        ps = np.nonzero(pos[i])[0]
        # prefer a rare phrase when the image has one
        rare = [p for p in ps if cats[p].get("frequency") == "r"]
        p = int(rare[0] if rare else (ps[0] if len(ps) else 0))
        axes[i, 0].imshow(imgs[i])
        axes[i, 0].set_title(f"{cats[p]['phrase']}{' (rare)' if rare else ''}", fontsize=6)
        for j, a in enumerate(arms, start=1):
            S = examples[f"{a}.S"][i, p]
            g = S.shape[0]
            axes[i, j].imshow(imgs[i], alpha=0.5)
            axes[i, j].imshow(S, extent=(0, size, size, 0), cmap="magma", alpha=0.6, interpolation="nearest")
            r, c = np.unravel_index(int(np.argmax(S)), S.shape)
            step = size / g
            axes[i, j].plot([(c + 0.5) * step], [(r + 0.5) * step], "c+", ms=8, mew=2)
            if i == 0:
                axes[i, j].set_title(a, fontsize=8)
        for ax in axes[i]:
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle("score map S_p of a present phrase (seed 0); + = argmax (pointing)", fontsize=8)
    return save_figure(fig, path)


def metric_bars(metrics: Mapping[str, Any], path: Path) -> Path:
    from paperflow.core.plotting import save_figure, subplots

    from paperflow.expalign.report import values

    keys = [("pointing", "pointing acc."), ("ap50", "box AP@0.5"), ("phrase_map", "phrase mAP"), ("swap", "attr-swap")]
    arms = list(metrics["arms"])
    fig, axes = subplots(1, len(keys), w=3.6, h=3.0)
    x = np.arange(len(arms))
    for ax, (k, lab) in zip(axes[0], keys):
        for off, split, col in ((-0.2, "seen", "tab:blue"), (0.2, "rare", "tab:orange")):
            mu, err = [], []
            for a in arms:
                v = values(metrics, a, k, split) or [np.nan]
                mu.append(float(np.mean(v)))
                err.append(float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0)
            ax.bar(x + off, mu, 0.4, yerr=err, color=col, label=split)
        ax.set_xticks(x)
        ax.set_xticklabels(arms, rotation=60, fontsize=7)
        ax.set_title(lab, fontsize=9)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"mean ± s.e. over {len(metrics['seeds'])} seeds", fontsize=8)
    return save_figure(fig, path)


def make_all(metrics: Mapping[str, Any], examples: Path, meta: Mapping[str, Any], outdir: Path) -> list[Path]:
    from safetensors.numpy import load_file

    outdir.mkdir(parents=True, exist_ok=True)
    ex = load_file(str(examples))
    return [heatmaps(ex, meta, outdir / FIGURES[0]), metric_bars(metrics, outdir / FIGURES[1])]
