"""Localisation and answer metrics: box(ρ), IoU, acc@IoU, mass on evidence, exact match and ANLS."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage


def box_of(rho: np.ndarray, thresh: float = 0.5) -> tuple[float, float, float, float]:
    """Page-normalised xyxy box of the connected component (4-connectivity) holding the argmax of ρ,
    after thresholding at `thresh`·max ρ (spec §2)."""
    H, W = rho.shape
    mask = rho >= thresh * rho.max()
    lab, _ = ndimage.label(mask)
    r, c = np.unravel_index(int(np.argmax(rho)), rho.shape)
    rows, cols = np.nonzero(lab == lab[r, c])
    return (cols.min() / W, rows.min() / H, (cols.max() + 1) / W, (rows.max() + 1) / H)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions; unit costs)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def anls_one(pred: str, answers: Sequence[str], tau: float = 0.5) -> float:
    """max over gold answers of s = 1 − NL if NL < τ else 0, NL = Lev(a, o)/max(|a|, |o|), compared
    case-insensitively after stripping surrounding whitespace (the DocVQA convention)."""
    o = pred.strip().lower()
    best = 0.0
    for a in answers:
        g = a.strip().lower()
        denom = max(len(g), len(o))
        nl = levenshtein(g, o) / denom if denom else 0.0
        best = max(best, 1.0 - nl if nl < tau else 0.0)
    return best


def anls(preds: Sequence[str], answers: Sequence[Sequence[str]], tau: float = 0.5) -> float:
    return float(np.mean([anls_one(p, a, tau) for p, a in zip(preds, answers)])) if preds else float("nan")


def question_metrics(rhos: Sequence[np.ndarray], evidence: np.ndarray, bbox: Sequence[float], line_id: np.ndarray,
                     values: Sequence[str], answers: Sequence[str]) -> dict[str, object]:
    """Metrics of one question from its stage densities (the last one is the prediction)."""
    ious = [iou(box_of(r), bbox) for r in rhos]
    rho = rhos[-1]
    mass = float(rho[evidence.astype(bool)].sum())
    n_lines = len(values)
    if n_lines:
        ids = line_id.reshape(-1)
        line_mass = np.bincount(ids[ids >= 0], weights=rho.reshape(-1)[ids >= 0], minlength=n_lines)
        pred = values[int(np.argmax(line_mass))]
    else:
        pred = ""
    em = float(any(pred.strip().lower() == a.strip().lower() for a in answers))
    return {"iou_stages": ious, "iou": ious[-1], "acc50": float(ious[-1] >= 0.5), "mass": mass,
            "pred": pred, "em": em, "anls": anls_one(pred, answers)}
