"""Label-noise injection with an authoritative record (spec §2).

`inject` is the released code's `get_noisylabels` rule (symmetric / asymmetric, single- or
multi-label rows), seeded. `make_record` runs it and returns the record: clean and noisy labels,
the picked rows in draw order, which rows changed, single-label src/tgt, and a JSON sidecar with
realised rates, the K x K transition counts and sha256 of both label matrices. Training reads the
`noisy` array of a record (`read_noisy`), never the clean one; `verify_record` re-derives the
noisy labels from the clean ones and fails, showing both hashes, if they differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paperflow.hashing.data import sha256_array


class NoiseRecordError(ValueError):
    pass


def default_map(K: int) -> np.ndarray:
    return (np.arange(K, dtype=np.int64) + 1) % K


def inject(Y: np.ndarray, rate: float, mode: str, seed: int, class_map: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """Corrupt rows of multi-hot `Y` (N, K). Returns (noisy copy, picked rows in draw order)."""
    Y = np.asarray(Y)
    if Y.ndim != 2:
        raise ValueError("labels must be a (N, K) multi-hot matrix")
    if mode not in ("sym", "asym"):
        raise ValueError(f"unknown noise mode {mode!r}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"noise rate {rate} outside [0, 1]")
    N, K = Y.shape
    rng = np.random.default_rng(seed)
    n = int(np.floor(N * rate + 1e-9))
    noisy = Y.copy()
    if n == 0:
        return noisy, np.zeros(0, np.int64)
    picked = rng.choice(N, size=n, replace=False)
    cmap = default_map(K) if class_map is None else np.asarray(class_map, np.int64)
    for i in picked:
        ones = np.flatnonzero(noisy[i] > 0)
        zeros = np.flatnonzero(noisy[i] == 0)
        if mode == "sym":
            if ones.size:
                noisy[i, int(rng.choice(ones))] = 0
            if zeros.size:
                noisy[i, int(rng.choice(zeros))] = 1
        else:
            if ones.size == 0 or K < 2:
                continue
            src = int(rng.choice(ones))
            tgt = int(cmap[src])
            if tgt == src or noisy[i, tgt] > 0:
                cur, found = tgt, False
                for _ in range(K - 1):
                    cur = int(cmap[cur])
                    if cur != src and noisy[i, cur] == 0:
                        tgt, found = cur, True
                        break
                if not found:
                    continue
            noisy[i, src] = 0
            noisy[i, tgt] = 1
    return noisy, picked.astype(np.int64)


def make_record(clean: np.ndarray, rate: float, mode: str, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    clean = np.asarray(clean, np.uint8)
    noisy, picked = inject(clean, rate, mode, seed)
    noisy = noisy.astype(np.uint8)
    N, K = clean.shape
    changed = np.any(noisy != clean, axis=1)
    single = bool(np.all(clean.sum(1) == 1))
    arrays: dict[str, np.ndarray] = {"clean": clean, "noisy": noisy, "picked": picked.astype(np.int32),
                                     "changed": changed}
    side: dict[str, Any] = {
        "requested_rate": float(rate), "mode": mode, "seed": int(seed), "n": int(N), "n_classes": int(K),
        "single_label": single, "n_picked": int(picked.size), "n_changed": int(changed.sum()),
        "realized_rate": float(changed.mean()) if N else 0.0,
        "entry_flip_rate": float((noisy != clean).sum() / (N * K)) if N else 0.0,
        "numpy_version": np.__version__,
        "sha256_clean": sha256_array(clean), "sha256_noisy": sha256_array(noisy),
    }
    if single:
        src = clean.argmax(1)
        tgt = noisy.argmax(1)
        arrays["src"] = src[changed].astype(np.int16)
        arrays["tgt"] = tgt[changed].astype(np.int16)
        T = np.zeros((K, K), np.int64)
        np.add.at(T, (src, tgt), 1)
        side["transitions"] = T.tolist()  # clean -> noisy counts over all rows
    return arrays, side


def write_record(npz_path: str | Path, json_path: str | Path, arrays: dict[str, np.ndarray], side: dict[str, Any]) -> None:
    from paperflow.core.io import atomic_path, write_json

    with atomic_path(npz_path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    write_json(json_path, side)


def load_record(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def read_noisy(path: str | Path) -> np.ndarray:
    """The labels training may see: the record's `noisy` array and nothing else."""
    with np.load(path, allow_pickle=False) as z:
        return np.asarray(z["noisy"], np.uint8)


def read_changed(path: str | Path) -> np.ndarray:
    """Per-row corruption mask: diagnostics only (AUROC of reliability weights), never training."""
    with np.load(path, allow_pickle=False) as z:
        return np.asarray(z["changed"], bool)


def verify_record(path: str | Path, side: dict[str, Any]) -> None:
    """Re-inject from the record's clean labels; the noisy hash must match exactly."""
    rec = load_record(path)
    if sha256_array(rec["noisy"]) != side["sha256_noisy"]:
        raise NoiseRecordError(f"{path}: stored noisy labels do not match the sidecar hash")
    again, picked = inject(rec["clean"], side["requested_rate"], side["mode"], side["seed"])
    h_again = sha256_array(again.astype(np.uint8))
    if h_again != side["sha256_noisy"] or not np.array_equal(picked.astype(np.int32), rec["picked"]):
        raise NoiseRecordError(f"{path}: re-injection gives sha256 {h_again}, record has {side['sha256_noisy']} "
                               f"(numpy {np.__version__} vs record {side['numpy_version']})")
