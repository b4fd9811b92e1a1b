"""Regression metrics with MMSA's definitions (thuiar/MMSA src/MMSA/utils/metricsTop.py, our own code):
MOSI/MOSEI — MAE, Pearson Corr, Acc-2 and weighted F1 both as negative/non-negative (``has0``: y ≥ 0) and
negative/positive (``non0``: y ≠ 0 only, y > 0), Acc-5 and Acc-7 (clip to ±2 / ±3, round, compare);
CH-SIMS — clip to [−1, 1], Acc-2/3/5 on fixed bins, weighted F1 on the 2 bins, MAE, Corr."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import f1_score


def _acc_round(p: np.ndarray, t: np.ndarray, c: float) -> float:
    return float(np.mean(np.round(np.clip(p, -c, c)) == np.round(np.clip(t, -c, c))))


def _corr(p: np.ndarray, t: np.ndarray) -> float:
    if np.std(p) == 0 or np.std(t) == 0:
        return float("nan")
    return float(np.corrcoef(p, t)[0, 1])


def mosi_regression(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    p, t = np.asarray(pred, float).ravel(), np.asarray(truth, float).ravel()
    nz = t != 0
    return {
        "mae": float(np.mean(np.abs(p - t))),
        "corr": _corr(p, t),
        "acc2_has0": float(np.mean((p >= 0) == (t >= 0))),
        "f1_has0": float(f1_score(t >= 0, p >= 0, average="weighted")),
        "acc2_non0": float(np.mean((p[nz] > 0) == (t[nz] > 0))) if nz.any() else float("nan"),
        "f1_non0": float(f1_score(t[nz] > 0, p[nz] > 0, average="weighted")) if nz.any() else float("nan"),
        "acc5": _acc_round(p, t, 2.0),
        "acc7": _acc_round(p, t, 3.0),
    }


def _bins(x: np.ndarray, edges: list[float]) -> np.ndarray:
    out = np.full(x.shape, -1, int)
    for i in range(len(edges) - 1):
        out[(x > edges[i]) & (x <= edges[i + 1])] = i
    return out


def sims_regression(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    p = np.clip(np.asarray(pred, float).ravel(), -1.0, 1.0)
    t = np.clip(np.asarray(truth, float).ravel(), -1.0, 1.0)
    e2, e3, e5 = [-1.01, 0.0, 1.01], [-1.01, -0.1, 0.1, 1.01], [-1.01, -0.7, -0.1, 0.1, 0.7, 1.01]
    return {
        "mae": float(np.mean(np.abs(p - t))), "corr": _corr(p, t),
        "acc2": float(np.mean(_bins(p, e2) == _bins(t, e2))),
        "acc3": float(np.mean(_bins(p, e3) == _bins(t, e3))),
        "acc5": float(np.mean(_bins(p, e5) == _bins(t, e5))),
        "f1": float(f1_score(_bins(t, e2), _bins(p, e2), average="weighted")),
    }


def regression_metrics(pred: np.ndarray, truth: np.ndarray, kind: str = "mosi") -> dict[str, float]:
    if kind == "mosi":
        return mosi_regression(pred, truth)
    if kind == "sims":
        return sims_regression(pred, truth)
    raise ValueError(f"unknown metric kind '{kind}' (mosi | sims)")
