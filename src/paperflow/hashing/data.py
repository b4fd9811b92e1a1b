"""Paired-feature data: the official `.mat` feature packs, our synthetic generator that writes the
same packs, and the canonical per-split `.npz` files every later stage reads.

Canonical split file `{split}.npz` (README, "Data schema"):
    img    float32 (N, d_img)   image features
    txt    float32 (N, d_txt)   text features
    labels uint8   (N, K)       multi-hot clean labels, 0-based classes
    ids    int64   (N,)         row index in the source pack's split
Splits: train, val, query, database. Single-label packs evaluate the test split against itself
(query == database == test, the query's own pair included), as the official code does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

SPLITS = ("train", "val", "query", "database")

# Official key layouts [C: XinchengSun/RFCMH load_data.py].
FORMATS: dict[str, dict[str, Any]] = {
    "xmedia": {"multilabel": False, "val_from_test": 500,
               "train": ("I_tr_CNN", "T_tr_BOW", "trImgCat"), "test": ("I_te_CNN", "T_te_BOW", "teImgCat")},
    "inria": {"multilabel": False,
              "train": ("tr_img", "tr_txt", "tr_img_lab"), "val": ("val_img", "val_txt", "val_img_lab"),
              "test": ("te_img", "te_txt", "te_img_lab"),
              "alt": {"train": ("img_train", "text_train", "label_train"),
                      "val": ("img_valid", "text_valid", "label_valid"),
                      "test": ("img_test", "text_test", "label_test")}},
    "xmedianet": {"multilabel": False,
                  "train": ("img_train", "text_train", "label_train"), "val": ("img_valid", "text_valid", "label_valid"),
                  "test": ("img_test", "text_test", "label_test")},
    # multi-label database/test packs (the layout the official code reads for IAPR-TC12)
    "ml_dbtest": {"multilabel": True,
                  "database": ("VDatabase", "YDatabase", "databaseL"), "test": ("VTest", "YTest", "testL")},
}


class DataError(ValueError):
    """A feature pack or split file is malformed; the message names the file."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_array(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# synthetic generator (spec §1.4)


def _latents(p: dict[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    K, cps, D = p["n_classes"], p["classes_per_super"], p["latent_dim"]
    n_super = -(-K // cps)
    c = rng.normal(0.0, p["sigma_super"], size=(n_super, D))
    mu = c[np.arange(K) // cps] + rng.normal(0.0, p["sigma_class"], size=(K, D))
    g_img = rng.normal(0.0, 1.0 / np.sqrt(D + p["private_dim"]), size=(p["d_img"], D + p["private_dim"]))
    g_txt = rng.normal(0.0, 1.0 / np.sqrt(D + p["private_dim"]), size=(p["d_txt"], D + p["private_dim"]))
    return mu, g_img, g_txt


def _features(h: np.ndarray, p: dict[str, Any], g_img: np.ndarray, g_txt: np.ndarray,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = h.shape[0]
    p_img = rng.normal(size=(n, p["private_dim"]))
    p_txt = rng.normal(size=(n, p["private_dim"]))
    x = np.maximum(np.hstack([h, p_img]) @ g_img.T + p["img_noise"] * rng.normal(size=(n, p["d_img"])), 0.0)
    lam = np.logaddexp(0.0, np.hstack([h, p_txt]) @ g_txt.T - p["txt_offset"])  # softplus
    counts = rng.poisson(lam)
    t = np.log1p(counts)
    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    return x.astype(np.float32), t.astype(np.float32)


def generate_single(p: dict[str, Any]) -> dict[str, np.ndarray]:
    """Single-label synthetic pack in the XMedia key layout (labels 1-based, as (N, 1) doubles)."""
    rng = np.random.default_rng([p["seed"], 7])
    K = p["n_classes"]
    mu, g_img, g_txt = _latents(p, rng)
    out: dict[str, np.ndarray] = {}
    for split, n, keys in (("train", p["n_train"], FORMATS["xmedia"]["train"]),
                           ("test", p["n_test"], FORMATS["xmedia"]["test"])):
        y = rng.permutation(np.arange(n) % K)  # class-balanced
        h = mu[y] + p["sigma_w"] * rng.normal(size=(n, mu.shape[1]))
        x, t = _features(h, p, g_img, g_txt, rng)
        out[keys[0]], out[keys[1]], out[keys[2]] = x, t, (y + 1).astype(np.float64)[:, None]
    return out


def generate_multi(p: dict[str, Any]) -> dict[str, np.ndarray]:
    """Multi-label synthetic pack in the database/test layout (multi-hot labels)."""
    rng = np.random.default_rng([p["seed"], 8])
    K = p["n_classes"]
    mu, g_img, g_txt = _latents(p, rng)
    probs = np.asarray(p["ml_label_counts_p"], float)
    probs = probs / probs.sum()
    out: dict[str, np.ndarray] = {}
    for n, keys in ((p["n_database_ml"], FORMATS["ml_dbtest"]["database"]),
                    (p["n_query_ml"], FORMATS["ml_dbtest"]["test"])):
        Y = np.zeros((n, K), np.uint8)
        counts = rng.choice(np.arange(1, len(probs) + 1), size=n, p=probs)
        for i, c in enumerate(counts):
            Y[i, rng.choice(K, size=min(c, K), replace=False)] = 1
        h = (Y @ mu) / Y.sum(1, keepdims=True) + p["sigma_w"] * rng.normal(size=(n, mu.shape[1]))
        x, t = _features(h, p, g_img, g_txt, rng)
        out[keys[0]], out[keys[1]], out[keys[2]] = x, t, Y.astype(np.float64)
    return out


def write_synthetic_mat(path: str | Path, fmt: str, p: dict[str, Any]) -> dict[str, np.ndarray]:
    """Write a synthetic pack as a MATLAB v5 .mat in the key layout of `fmt`."""
    import scipy.io as sio

    from paperflow.core.io import atomic_path

    if fmt == "xmedia":
        arrays = generate_single(p)
    elif fmt == "ml_dbtest":
        arrays = generate_multi(p)
    else:
        raise ValueError(f"synthetic generator writes the xmedia or ml_dbtest layout, not {fmt!r}")
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            sio.savemat(fh, arrays, do_compression=False)
    return arrays


# ----------------------------------------------------------------------------------------------
# loader of the official packs


def _loadmat(path: Path) -> dict[str, np.ndarray]:
    import scipy.io as sio

    if not path.exists():
        raise DataError(f"{path}: feature pack not found")
    try:
        return sio.loadmat(path)
    except NotImplementedError as e:  # v7.3 (HDF5)
        raise DataError(f"{path}: MATLAB v7.3/HDF5 pack; re-save it as v5 (scipy.io) first") from e
    except (ValueError, IndexError, TypeError, OSError, EOFError) as e:  # scipy's errors on garbage vary
        raise DataError(f"{path}: not a readable .mat file ({type(e).__name__}: {e})") from e


def _get(m: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    if key not in m:
        raise DataError(f"{path}: key {key!r} missing (found {sorted(k for k in m if not k.startswith('__'))})")
    a = np.asarray(m[key])
    if a.dtype == object:
        raise DataError(f"{path}: key {key!r} is an object array")
    return a


def load_pack(path: str | Path, fmt: str, n_train_ml: int = 4000, n_val_ml: int = 500,
              split_seed: int = 0) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
    """Read an official (or synthetic) pack into canonical splits. Returns (splits, meta)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise DataError(f"{path}: unknown format {fmt!r}")
    spec = FORMATS[fmt]
    m = _loadmat(path)
    raw: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    layout = spec
    if fmt == "inria" and spec["train"][0] not in m and "alt" in spec:
        layout = {**spec, **spec["alt"]}
    for split in ("train", "val", "test", "database"):
        if split in layout:
            ki, kt, kl = layout[split]
            raw[split] = (_get(m, ki, path), _get(m, kt, path), _get(m, kl, path))
    if "val_from_test" in spec:  # XMedia: val = first 500 of the 1000-item test set [C]
        v = spec["val_from_test"]
        img, txt, lab = raw["test"]
        if img.shape[0] <= v:
            raise DataError(f"{path}: test split has {img.shape[0]} rows, needs > {v} to carve validation")
        raw["val"] = (img[:v], txt[:v], lab[:v])
        raw["test"] = (img[v:], txt[v:], lab[v:])
    ids_of = {s: np.arange(raw[s][0].shape[0], dtype=np.int64) for s in raw}
    if "val_from_test" in spec:
        ids_of["test"] = ids_of["test"] + spec["val_from_test"]

    meta: dict[str, Any] = {"format": fmt, "source_file": str(path), "source_sha256": sha256_file(path),
                            "multilabel": spec["multilabel"], "feature_type": "paired img/txt features"}
    if not spec["multilabel"]:
        vecs = {s: raw[s][2].reshape(-1) for s in raw}
        allv = np.concatenate(list(vecs.values()))
        if not np.all(np.isfinite(allv)) or not np.all(allv == np.round(allv)):
            raise DataError(f"{path}: labels are not integers")
        base = int(allv.min())
        if base not in (0, 1):
            raise DataError(f"{path}: label base {base} is neither 0 nor 1")
        K = int(allv.max()) - base + 1
        train_classes = np.unique(vecs["train"] - base)
        if len(train_classes) != K:
            raise DataError(f"{path}: train split lacks classes {sorted(set(range(K)) - set(train_classes.tolist()))}")
        labels = {s: np.eye(K, dtype=np.uint8)[(v - base).astype(np.int64)] for s, v in vecs.items()}
        meta["label_base"] = base
        splits_src = {"train": "train", "val": "val", "query": "test", "database": "test"}
    else:
        labels = {s: (raw[s][2] > 0).astype(np.uint8) for s in raw}
        K = labels["database"].shape[1]
        n_db = labels["database"].shape[0]
        if n_train_ml + n_val_ml > n_db:
            raise DataError(f"{path}: database has {n_db} rows < train {n_train_ml} + val {n_val_ml}")
        perm = np.random.default_rng([split_seed, 99]).permutation(n_db)
        tr, va = np.sort(perm[:n_train_ml]), np.sort(perm[n_train_ml:n_train_ml + n_val_ml])
        db = raw["database"]
        raw["train"] = (db[0][tr], db[1][tr], db[2][tr])
        raw["val"] = (db[0][va], db[1][va], db[2][va])
        labels["train"], labels["val"] = labels["database"][tr], labels["database"][va]
        ids_of["train"], ids_of["val"] = tr.astype(np.int64), va.astype(np.int64)
        meta["label_base"] = None
        meta["train_val_from_database_seed"] = split_seed
        splits_src = {"train": "train", "val": "val", "query": "test", "database": "database"}

    splits: dict[str, dict[str, np.ndarray]] = {}
    for split, src in splits_src.items():
        img, txt, _ = raw[src]
        img = np.asarray(img, np.float32)
        txt = np.asarray(txt, np.float32)
        lab = labels[src]
        n = img.shape[0]
        if txt.shape[0] != n or lab.shape[0] != n:
            raise DataError(f"{path}: split {src}: {n} images, {txt.shape[0]} texts, {lab.shape[0]} labels")
        if not (np.all(np.isfinite(img)) and np.all(np.isfinite(txt))):
            raise DataError(f"{path}: split {src} has NaN/inf features")
        if np.any(lab.sum(1) == 0):
            raise DataError(f"{path}: split {src} has rows without labels")
        splits[split] = {"img": img, "txt": txt, "labels": lab, "ids": ids_of[src]}
    meta.update({"n_classes": int(K), "d_img": int(splits["train"]["img"].shape[1]),
                 "d_txt": int(splits["train"]["txt"].shape[1]),
                 "sizes": {s: int(v["img"].shape[0]) for s, v in splits.items()},
                 "query_is_database": splits_src["query"] == splits_src["database"]})
    return splits, meta


def save_split(path: str | Path, split: dict[str, np.ndarray]) -> None:
    from paperflow.core.io import atomic_path

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **split)


def load_split(path: str | Path, with_labels: bool = True) -> dict[str, np.ndarray]:
    """Read a canonical split file (no pickles). `with_labels=False` drops the clean labels so a
    caller that must not see them cannot."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = ("img", "txt", "labels", "ids") if with_labels else ("img", "txt", "ids")
            out = {k: z[k] for k in keys}
    except (KeyError, ValueError, OSError) as e:
        raise DataError(f"{path}: not a canonical split file ({e})") from e
    if out["img"].shape[0] != out["txt"].shape[0]:
        raise DataError(f"{path}: img/txt row counts differ")
    return out
