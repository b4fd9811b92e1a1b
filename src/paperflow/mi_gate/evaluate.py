"""Robustness metrics [recon]: accuracy, visually induced error (VIE) = P(wrong on corrupted | right on
clean), consistency = P(same prediction on clean and corrupted), per-type accuracy."""

from __future__ import annotations

import numpy as np

from paperflow.mi_gate.data import TYPES


def vie(pred_clean: np.ndarray, pred_corr: np.ndarray, y: np.ndarray) -> float:
    """P(wrong on corrupted | right on clean); NaN when nothing is right on clean."""
    right = pred_clean == y
    if not right.any():
        return float("nan")
    return float(np.mean(pred_corr[right] != y[right]))


def consistency(pred_clean: np.ndarray, pred_corr: np.ndarray) -> float:
    return float(np.mean(pred_clean == pred_corr))


def per_type_accuracy(pred: np.ndarray, y: np.ndarray, types: np.ndarray | None) -> dict[str, float]:
    if types is None:
        return {}
    return {t: float(np.mean(pred[types == i] == y[types == i])) for i, t in enumerate(TYPES) if (types == i).any()}


def condition_metrics(pred_clean: np.ndarray, pred: np.ndarray, y: np.ndarray,
                      types: np.ndarray | None) -> dict[str, object]:
    return {"acc": float(np.mean(pred == y)), "vie": vie(pred_clean, pred, y),
            "consistency": consistency(pred_clean, pred), "per_type": per_type_accuracy(pred, y, types)}
