"""Prep: project a run with the composed operator, z-score each output row over time (mean/std
kept), resample to TR = 1 s, cast to float16, and store records as HuggingFace Arrow datasets.

Record schema (one per run, or per clip for state sets):
  bold      Array2D((None, D), float16)  normalized, resampled signal (T, D)
  mean, std Sequence(float32) length D   per-row temporal mean/std of the projected run (0 where std <= 1e-6)
  tr        float32 (= 1.0), tr_orig float32, n_frames int32
  space, projector_id, subject, session, task, run, site, source, source_sha256  (strings)
  start, label  int32 (clip sets only; -1 otherwise); trait_group, trait_age_bin int32 (-1 if unknown)
Reconstruction: bold * std + mean == projection (before resampling), within float16 error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

STD_EPS = 1e-6


def zscore_rows(F: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row temporal z-score of F (D, T). Rows with std <= 1e-6 become 0 with mean = std = 0."""
    F = np.asarray(F, dtype=np.float64)
    mean = F.mean(axis=1)
    std = F.std(axis=1)
    flat = std <= STD_EPS
    Z = (F - mean[:, None]) / np.where(flat, 1.0, std)[:, None]
    Z[flat] = 0.0
    mean[flat] = 0.0
    std[flat] = 0.0
    return Z, mean.astype(np.float32), std.astype(np.float32)


def resample_tr(Z: np.ndarray, tr: float, new_tr: float = 1.0) -> np.ndarray:
    """(D, T) at `tr` -> (D, floor(T tr / new_tr)) at `new_tr`: Chebyshev-I anti-alias filter
    (order 8, 0.05 dB, cutoff 0.8/q of Nyquist, zero phase) when downsampling, then PCHIP."""
    from scipy.interpolate import PchipInterpolator
    from scipy.signal import cheby1, sosfiltfilt

    T = Z.shape[1]
    n_out = int(np.floor(T * tr / new_tr + 1e-9))
    if abs(tr - new_tr) < 1e-9:
        return Z[:, :n_out].copy()
    q = new_tr / tr
    if q > 1:
        sos = cheby1(8, 0.05, 0.8 / q, output="sos")
        Z = sosfiltfilt(sos, Z, axis=1)
    t_in = np.arange(T) * tr
    t_out = np.arange(n_out) * new_tr
    # PCHIP along axis 0 of the C-contiguous (T, D) copy: the same elementwise arithmetic as
    # axis=1 on (D, T) (scipy moves the axis to the front either way), without scipy's strided
    # copies; returns the (D, n_out) transposed view of the (n_out, D) result, as before
    Zt = np.ascontiguousarray(Z.T)
    return PchipInterpolator(t_in, Zt, axis=0, extrapolate=True)(t_out).T


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def prep_run(F: np.ndarray, tr: float, new_tr: float = 1.0) -> dict[str, np.ndarray]:
    """Projected run F (D, T) -> bold (T', D) float16, mean/std float32 (D,)."""
    Z, mean, std = zscore_rows(F)
    R = resample_tr(Z, tr, new_tr)
    return {"bold": R.T.astype(np.float16), "mean": mean, "std": std}


def features(D: int):
    import datasets as hfd

    return hfd.Features({
        "bold": hfd.Array2D(shape=(None, D), dtype="float16"),
        "mean": hfd.Sequence(hfd.Value("float32"), length=D),
        "std": hfd.Sequence(hfd.Value("float32"), length=D),
        "tr": hfd.Value("float32"), "tr_orig": hfd.Value("float32"), "n_frames": hfd.Value("int32"),
        "space": hfd.Value("string"), "projector_id": hfd.Value("string"), "subject": hfd.Value("string"),
        "session": hfd.Value("string"), "task": hfd.Value("string"), "run": hfd.Value("string"),
        "site": hfd.Value("string"), "source": hfd.Value("string"), "source_sha256": hfd.Value("string"),
        "start": hfd.Value("int32"), "label": hfd.Value("int32"),
        "trait_group": hfd.Value("int32"), "trait_age_bin": hfd.Value("int32"),
    })


def save_splits(out_dir: str | Path, splits: dict[str, list[dict[str, Any]]], D: int) -> None:
    """Write a DatasetDict (one split per key) atomically to `out_dir`."""
    import datasets as hfd

    from paperflow.core.io import atomic_path

    feats = features(D)
    dd = hfd.DatasetDict({k: hfd.Dataset.from_list(v, features=feats) if v else
                          hfd.Dataset.from_dict({c: [] for c in feats}, features=feats) for k, v in splits.items()})
    with atomic_path(out_dir) as tmp:
        dd.save_to_disk(str(tmp))


def load_splits(path: str | Path):
    import datasets as hfd

    return hfd.load_from_disk(str(path))


def bold_array(ds) -> list[np.ndarray]:
    """The bold matrices of a split as float32 numpy arrays (T, D)."""
    return [np.asarray(b, dtype=np.float32) for b in ds.with_format("numpy")["bold"]]
