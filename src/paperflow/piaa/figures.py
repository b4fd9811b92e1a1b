"""Figures: mAP by object-area tercile per arm (mean ± s.e. over seeds) and the held-out temperature grid."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

FIGURES = ["map_by_tercile.png", "temperature_grid.png", "patch_maps.png"]
ARMS = ["a1_cls", "a2_patch_van", "a3_patch_sclip", "a4_text", "a4_pvcl", "a5_piaa", "a5_tuned"]


def make_all(metrics: Mapping[str, Any], outdir: Path) -> list[Path]:
    from paperflow.core.plotting import mean_se, save_figure, subplots

    outdir.mkdir(parents=True, exist_ok=True)
    fig, axes = subplots(1, 1, w=8, h=3.6)
    ax = axes[0, 0]
    arms = metrics["arms"]
    groups = ["overall", "small", "medium", "large"]
    width = 0.8 / len(ARMS)
    for k, arm in enumerate(ARMS):
        vals = [arms[arm]["map"]] + [arms[arm].get("map_by_tercile", {}).get(t, [np.nan] * len(arms[arm]["map"]))
                                     for t in groups[1:]]
        m, se = zip(*[(mean_se(np.asarray(v, float)[:, None])[0][0], mean_se(np.asarray(v, float)[:, None])[1][0])
                      for v in vals])
        ax.bar(np.arange(4) + (k - len(ARMS) / 2 + 0.5) * width, m, width, yerr=se, label=arm, capsize=2)
    ax.set_xticks(range(4), groups)
    ax.set_ylabel("mAP")
    ax.set_title("mAP by object-area tercile")
    ax.legend(fontsize=7, ncol=4)
    outs = [save_figure(fig, outdir / FIGURES[0])]

    fig, axes = subplots(1, 1, w=6, h=3.4)
    ax = axes[0, 0]
    cells = metrics["grid"][0]
    ho = np.mean([[c["holdout_map"] for c in g] for g in metrics["grid"]], axis=0)
    te = np.mean([[c["test_map"] for c in g] for g in metrics["grid"]], axis=0)
    labels = [f"{c['tau_d']:g}/{c['t_inf']:g}/{c['alpha_patch']:g}/{c['alpha_cls']:g}" for c in cells]
    x = np.arange(len(cells))
    ax.plot(x, ho, "o-", label="held-out train (used for the choice)")
    ax.plot(x, te, "s--", label="test (record only)")
    ax.set_xticks(x, labels, rotation=60, fontsize=7)
    ax.set_xlabel("τ_d / T_inf / α_patch / α_cls")
    ax.set_ylabel("mAP of full PIAA")
    ax.legend(fontsize=7)
    outs.append(save_figure(fig, outdir / FIGURES[1]))
    outs.append(patch_maps(metrics, outdir / FIGURES[2]))
    return outs


def patch_maps(metrics: Mapping[str, Any], path: Path) -> Path:
    """Example test images (first seed) with, per true label, the full-PIAA patch map (GDA probability on
    SCLIP patches) and the patch–text cosine on vanilla patches."""
    from paperflow.core.plotting import save_figure, subplots

    ex = metrics.get("examples") or []
    classes = metrics.get("classes") or []
    rows = max(1, len(ex))
    cols = 1 + 2 * max([len(e["labels"]) for e in ex] or [1])
    fig, axes = subplots(rows, cols, w=1.7, h=1.7)
    for ax in axes.ravel():
        ax.axis("off")
    for r, e in enumerate(ex):
        axes[r, 0].imshow(np.asarray(e["image"], np.uint8))
        axes[r, 0].set_title(f"test #{e['index']}", fontsize=7)
        for k, c in enumerate(e["labels"]):
            name = classes[c] if c < len(classes) else str(c)
            axes[r, 1 + 2 * k].imshow(np.asarray(e["gda"][str(c)]), cmap="magma")
            axes[r, 1 + 2 * k].set_title(f"PVCL: {name}", fontsize=6)
            axes[r, 2 + 2 * k].imshow(np.asarray(e["text_vanilla"][str(c)]), cmap="viridis")
            axes[r, 2 + 2 * k].set_title(f"text, vanilla: {name}", fontsize=6)
    if not ex:
        axes[0, 0].text(0.5, 0.5, "no multi-label test image", ha="center", va="center")
    return save_figure(fig, path)
