"""Data scaling: best validation loss vs pretraining frames; the paper's power law
L(N) = (N / a)^b fitted (least squares of log L on log N) on the 3 smallest sizes and checked by
extrapolation to the larger ones, plus a saturating fit L = E + (N / a)^b on all sizes, and the
log-log fit over all sizes with its slope CI and R² (core.stats.linear_fit) that the scaling claim
is judged on (claims.scaling)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def power_fit(N: np.ndarray, L: np.ndarray) -> tuple[float, float]:
    """(a, b) of L = (N / a)^b by least squares on logs."""
    b, c = np.polyfit(np.log(N), np.log(L), 1)
    return float(np.exp(-c / b)) if b != 0 else float("inf"), float(b)


def saturating_fit(N: np.ndarray, L: np.ndarray) -> dict[str, float] | None:
    from scipy.optimize import curve_fit

    if len(N) < 4:
        return None
    try:
        f = lambda n, E, la, b: E + np.exp(b * (np.log(n) - la))  # noqa: E731
        (E, la, b), _ = curve_fit(f, N, L, p0=[0.5 * L.min(), np.log(N.min()), -0.3], maxfev=20000)
        return {"E": float(E), "a": float(np.exp(la)), "b": float(b)}
    except Exception:  # noqa: BLE001 - report as not fitted
        return None


def scaling_outputs(results: list[Path], out_dir: Path) -> dict[str, Any]:
    from paperflow.core.plotting import save_figure, subplots
    from paperflow.fmri.claims import loglog_fit

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(Path(r).read_text()) for r in results]
    rows.sort(key=lambda r: (r["frames"], r["tag"]))
    with open(out_dir / "points.csv", "w") as fh:
        fh.write("tag,n_subjects,frames,best_val_loss\n")
        for r in rows:
            fh.write(f"{r['tag']},{r['n_subjects']},{r['frames']},{r['best_val_loss']:.6f}\n")
    sizes = sorted({r["n_subjects"] for r in rows})
    N = np.array([np.mean([r["frames"] for r in rows if r["n_subjects"] == s]) for s in sizes])
    L = np.array([np.mean([r["best_val_loss"] for r in rows if r["n_subjects"] == s]) for s in sizes])
    fit: dict[str, Any] = {"sizes": sizes, "frames": N.tolist(), "loss": L.tolist(),
                           "monotone_decreasing": bool(np.all(np.diff(L) < 0))}
    if all(r.get("val_loss_init") is not None for r in rows):  # validation loss before training, per size
        fit["loss_init"] = [float(np.mean([r["val_loss_init"] for r in rows if r["n_subjects"] == s])) for s in sizes]
    fit["loglog"] = loglog_fit(N.tolist(), L.tolist())  # all sizes: the scaling claim's slope CI, R², monotone
    if len(N) >= 3:
        a, b = power_fit(N[:3], L[:3])
        pred = (N / a) ** b
        fit["power_3pt"] = {"a": a, "b": b, "extrapolation": [
            {"n_subjects": s, "frames": float(n), "measured": float(l), "predicted": float(pp),
             "rel_error": float((pp - l) / l)} for s, n, l, pp in zip(sizes[3:], N[3:], L[3:], pred[3:])]}
    fit["saturating"] = saturating_fit(N, L)
    (out_dir / "fit.json").write_text(json.dumps(fit, indent=2))
    fig, ax = subplots(1, 1)
    ax = ax[0, 0]
    ax.scatter([r["frames"] for r in rows], [r["best_val_loss"] for r in rows], s=12, alpha=0.6, label="runs")
    ax.plot(N, L, "o-", label="mean per size")
    if "power_3pt" in fit:
        nn = np.geomspace(N.min(), N.max(), 50)
        ax.plot(nn, (nn / fit["power_3pt"]["a"]) ** fit["power_3pt"]["b"], "--",
                label=f"3-pt fit b={fit['power_3pt']['b']:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pretraining frames (1 s)")
    ax.set_ylabel("best validation loss")
    ax.legend(fontsize=7)
    save_figure(fig, out_dir / "curve.png")
    m = {"monotone_decreasing": fit["monotone_decreasing"], "n_points": len(rows)}
    if "power_3pt" in fit:
        m["power_b"] = fit["power_3pt"]["b"]
    return m
