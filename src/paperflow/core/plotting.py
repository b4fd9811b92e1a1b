"""Plotting helpers: headless matplotlib, atomic PNG saving, mean ± s.e. bands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from paperflow.core.io import atomic_path  # noqa: E402


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    plt.close(fig)
    return Path(path)


def mean_se(curves: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over `axis` (s.e. is 0 for a single curve)."""
    curves = np.asarray(curves, dtype=float)
    n = curves.shape[axis]
    mean = curves.mean(axis=axis)
    se = curves.std(axis=axis, ddof=1) / np.sqrt(n) if n > 1 else np.zeros_like(mean)
    return mean, se


def band(ax: Any, x: np.ndarray, curves: np.ndarray, label: str, **kw: Any) -> None:
    """Plot the mean of `curves` (seeds × points) with a ±1 s.e. band."""
    mean, se = mean_se(curves)
    (line,) = ax.plot(x, mean, label=label, **kw)
    ax.fill_between(x, mean - se, mean + se, alpha=0.2, color=line.get_color())


def subplots(nrows: int = 1, ncols: int = 1, w: float = 4.5, h: float = 3.4) -> tuple[Any, Any]:
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False, layout="constrained")
    return fig, axes
