"""Figures: IoU by stage (OOD), evidence maps ρ_k on OOD example pages, the fixed-potential rerun."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.plotting import band, save_figure, subplots
from paperflow.docloc.report import ARM_NAMES, jko_arm

FIGURES = ("iou_by_stage.png", "evidence_maps.png", "mechanics.png")
COLOURS = {"single": "tab:orange", "now2": "tab:green", "jko_b": "tab:blue", "jko_a": "tab:purple", "poe": "tab:red"}


def iou_by_stage(metrics: Mapping[str, Any], path: Path) -> None:
    fig, axes = subplots(1, 1, w=5.5, h=3.8)
    ax = axes[0, 0]
    for v, r in metrics["runs"].items():
        if v not in ARM_NAMES:
            continue
        curves = np.array([d["splits"]["test_ood"]["iou_stages"] for d in r["seeds"].values()])
        x = np.arange(1, curves.shape[1] + 1)
        if v == "poe":
            ax.scatter([curves.shape[1]], [curves[:, -1].mean()], marker="*", s=90, label=f"{ARM_NAMES[v]} (fused)",
                       color=COLOURS[v])
        elif curves.shape[1] == 1:
            ax.scatter([1], [curves[:, 0].mean()], marker="o", s=50, label=ARM_NAMES[v], color=COLOURS[v])
        else:
            band(ax, x, curves, ARM_NAMES[v], marker=".", color=COLOURS[v])
            ax.set_xticks(x)
    ax.set_xlabel("stage k")
    ax.set_ylabel("mean box IoU (test_ood)")
    ax.set_title("IoU by stage (±1 s.e. over seeds)")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def _variant_of(p: Path) -> tuple[str, str]:
    return p.parent.name, p.name.split(".")[0]  # runs/<variant>/s<seed>.examples.npz


def evidence_maps(metrics: Mapping[str, Any], features: Path, examples: Sequence[Path], path: Path) -> None:
    """Rows: example OOD pages; columns: the selected JKO arm's ρ_1..ρ_K, no-W2's ρ_K, single, PoE fused.
    Gold box in green, OCR lines in grey."""
    import matplotlib.patches as mpatches

    from paperflow.docloc.data import load_features

    feats = load_features(Path(features) / "test_ood.npz")
    dim = int(feats["layout"][0])  # tokens: [embedding (dim) | box (4) | matches (max_q) | present]
    ex = {}
    for p in examples:
        v, s = _variant_of(Path(p))
        if s == "s0" and v in ARM_NAMES:
            with np.load(p) as z:
                ex[v] = z["rho"]
    a = jko_arm(metrics)
    cols: list[tuple[str, np.ndarray]] = []  # (title, (n, G, G))
    if a in ex:
        cols += [(f"{a} ρ_{k + 1}", ex[a][k]) for k in range(ex[a].shape[0])]
    for v, k, t in (("now2", -1, "no-W2 ρ_K"), ("single", -1, "single ρ"), ("poe", -1, "PoE fused")):
        if v in ex:
            cols.append((t, ex[v][k]))
    if not cols:
        fig, axes = subplots(1, 1)
        axes[0, 0].text(0.5, 0.5, "no example densities (seed 0)", ha="center")
        save_figure(fig, path)
        return
    n = cols[0][1].shape[0]
    fig, axes = subplots(n, len(cols), w=2.2, h=2.2)
    G = cols[0][1].shape[-1]
    for i in range(n):
        x0, y0, x1, y1 = feats["bbox"][i]
        tok = feats["tokens"][i]
        for j, (title, rho) in enumerate(cols):
            ax = axes[i, j]
            ax.imshow(rho[i], cmap="magma", extent=(0, 1, 1, 0))
            for t in tok[tok[:, -1] > 0.5]:
                lx0, ly0, lx1, ly1 = t[dim:dim + 4]
                ax.add_patch(mpatches.Rectangle((lx0, ly0), lx1 - lx0, ly1 - ly0, fill=False, ec="0.7", lw=0.4))
            ax.add_patch(mpatches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="lime", lw=1.2))
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(title, fontsize=8)
    fig.suptitle(f"evidence maps on test_ood pages (seed 0; {G}×{G} cells; green: gold box)", fontsize=9)
    save_figure(fig, path)


def mechanics(metrics: Mapping[str, Any], path: Path) -> None:
    mech = metrics.get("mechanics")
    fig, axes = subplots(1, 1, w=7.5, h=3.6)
    ax = axes[0, 0]
    if not mech:
        ax.text(0.5, 0.5, "mechanics rerun disabled", ha="center")
        save_figure(fig, path)
        return
    offs = list(mech["per_page"])
    names = list(mech["per_page"][offs[0]])
    w = 0.8 / len(offs)
    for i, off in enumerate(offs):
        acc = [float(np.mean(mech["per_page"][off][n])) for n in names]
        ax.bar(np.arange(len(names)) + i * w, acc, w, label=f"prior offset {off}")
    ax.set_xticks(np.arange(len(names)) + 0.4 - w / 2, names, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("evidence-block accuracy")
    ax.set_title(f"fixed potentials (spec §5 rerun), {mech['params']['pages']} pages")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def make_all(metrics: Mapping[str, Any], features: Path, examples: Sequence[Path], outdir: str | Path) -> list[Path]:
    outdir = Path(outdir)
    iou_by_stage(metrics, outdir / FIGURES[0])
    evidence_maps(metrics, features, examples, outdir / FIGURES[1])
    mechanics(metrics, outdir / FIGURES[2])
    return [outdir / f for f in FIGURES]
