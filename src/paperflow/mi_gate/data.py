"""The synthetic interaction world (spec §9, tiny experiment) and the one loader real data also uses.

Files (mirroring the authors' layout: a `data.json` table plus a feature array):
- `data.json`: a list of records `{id: int, original_text: str, correct_answer: "Yes."|"No.", split:
  "train"|"val"|"test", latent: {type, colour, shape, cue}}`. `latent` is bookkeeping for the sanity
  cross-tab and per-type accuracy only; no model ever reads it.
- `image_features.npy`: float32 (N, image_dim), row k = the record at position k of data.json.

A sample's latent type is never a feature: the image is a noisy projection of the colour and shape
one-hots; the text is template words (embedded with `paperflow.nn.hashtext`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, write_json
from paperflow.core.seeding import stream

TYPES = ("U_V", "R", "U_T", "S")
COLOURS = ("red", "yellow", "green", "blue")  # the first two are warm
SHAPES = ("square", "circle", "triangle", "star")
CUES = ("alpha", "beta")  # cue 1 = "beta"
LABELS = ("No.", "Yes.")  # correct_answer → 0 / 1 (the code's label map)
SPLITS = ("train", "val", "test")
TEMPLATES = {
    "U_V": ("is this one good", "what about this item", "judge the picture"),
    "R": ("this item is {colour}", "a {colour} thing here", "the object looks {colour}"),
    "U_T": ("the tag reads {cue}", "note says {cue}"),
    "S": ("swap if warm {cue}", "warm flips {cue}"),
}


def warm(colour: int | np.ndarray) -> Any:
    return np.asarray(colour) < 2


def label_of(t: str, colour: int, cue: int) -> int:
    """U_V and R: warm colour; U_T: the text cue; S: XOR(warm colour, cue)."""
    w = int(colour < 2)
    if t in ("U_V", "R"):
        return w
    if t == "U_T":
        return int(cue)
    if t == "S":
        return w ^ int(cue)
    raise ValueError(f"unknown type {t!r}")


def projection(dim: int, seed: int) -> np.ndarray:
    """The fixed (8, dim) projection of [colour one-hot; shape one-hot]."""
    return stream(seed, "projection").standard_normal((len(COLOURS) + len(SHAPES), dim)).astype(np.float32)


def render_images(colour: np.ndarray, shape: np.ndarray, P: np.ndarray, noise: float,
                  rng: np.random.Generator) -> np.ndarray:
    onehot = np.zeros((len(colour), len(COLOURS) + len(SHAPES)), np.float32)
    onehot[np.arange(len(colour)), colour] = 1
    onehot[np.arange(len(colour)), len(COLOURS) + shape] = 1
    return (onehot @ P + noise * rng.standard_normal((len(colour), P.shape[1]))).astype(np.float32)


def stratified_split(labels: np.ndarray, fractions: Sequence[float], seed: int) -> np.ndarray:
    """'train'/'val'/'test' per sample, stratified by label (deterministic in `seed`)."""
    f = np.asarray(fractions, float) / float(np.sum(fractions))
    out = np.empty(len(labels), dtype=object)
    rng = np.random.default_rng(seed)
    for y in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == y))
        n_tr = int(round(f[0] * len(idx)))
        n_va = int(round(f[1] * len(idx)))
        out[idx[:n_tr]] = "train"
        out[idx[n_tr:n_tr + n_va]] = "val"
        out[idx[n_tr + n_va:]] = "test"
    return out


def generate(p: Mapping[str, Any]) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The spec's mixture of interaction types: records (data.json) and image features."""
    n, seed = int(p["n"]), int(p["seed"])
    rng = stream(seed, "latent")
    probs = np.asarray(p["type_probs"], float)
    types = rng.choice(len(TYPES), size=n, p=probs / probs.sum())
    colour = rng.integers(0, len(COLOURS), n)
    shape = rng.integers(0, len(SHAPES), n)
    cue = rng.integers(0, 2, n)
    tmpl = rng.integers(0, 1 << 30, n)
    P = projection(int(p["image_dim"]), seed)
    images = render_images(colour, shape, P, float(p["image_noise"]), stream(seed, "image_noise"))
    labels = np.array([label_of(TYPES[t], int(c), int(b)) for t, c, b in zip(types, colour, cue)])
    splits = stratified_split(labels, p["split"], int(p["split_seed"]))
    records = []
    for i in range(n):
        t = TYPES[types[i]]
        choices = TEMPLATES[t]
        text = choices[tmpl[i] % len(choices)].format(colour=COLOURS[colour[i]], cue=CUES[cue[i]])
        records.append({"id": i, "original_text": text, "correct_answer": LABELS[labels[i]], "split": str(splits[i]),
                        "latent": {"type": t, "colour": COLOURS[colour[i]], "shape": SHAPES[shape[i]],
                                   "cue": int(cue[i])}})
    return records, images


def write_dataset(out: Path, records: Sequence[Mapping[str, Any]], images: np.ndarray) -> dict[str, int]:
    """Write `out/data.json` and `out/image_features.npy` (atomically, as one directory)."""
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        write_json(tmp / "data.json", list(records))
        np.save(tmp / "image_features.npy", images.astype(np.float32))
    return {s: sum(r["split"] == s for r in records) for s in SPLITS}


@dataclass
class Dataset:
    """One split, as every stage reads it. `types`/`colour`/`shape` come from `latent` (None on real data)."""

    ids: np.ndarray
    text: list[str]
    y: np.ndarray
    image: np.ndarray
    types: np.ndarray | None
    colour: np.ndarray | None
    shape: np.ndarray | None

    def __len__(self) -> int:
        return len(self.ids)


def load_dataset(data_json: str | Path, image_features: str | Path) -> dict[str, Dataset]:
    """Read data.json + the feature array, validate them, return the splits. The loader real data uses."""
    records = json.loads(Path(data_json).read_text())
    images = np.load(image_features)
    if images.ndim != 2 or images.shape[0] != len(records):
        raise ValueError(f"{image_features}: shape {images.shape} does not match {len(records)} records")
    if not np.isfinite(images).all():
        raise ValueError(f"{image_features}: non-finite features")
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{data_json}: duplicate ids")
    out = {}
    for s in SPLITS:
        idx = [k for k, r in enumerate(records) if r.get("split") == s]
        if not idx:
            raise ValueError(f"{data_json}: no '{s}' records")
        rs = [records[k] for k in idx]
        bad = {r["correct_answer"] for r in rs} - set(LABELS)
        if bad:
            raise ValueError(f"{data_json}: unknown correct_answer {sorted(bad)} (expected {LABELS})")
        lat = [r.get("latent") for r in rs]
        has = all(x is not None for x in lat)
        out[s] = Dataset(
            ids=np.array([r["id"] for r in rs]), text=[str(r["original_text"]) for r in rs],
            y=np.array([LABELS.index(r["correct_answer"]) for r in rs], dtype=np.int64),
            image=images[idx].astype(np.float32),
            types=np.array([TYPES.index(x["type"]) for x in lat]) if has else None,  # type: ignore[index]
            colour=np.array([COLOURS.index(x["colour"]) for x in lat]) if has else None,  # type: ignore[index]
            shape=np.array([SHAPES.index(x["shape"]) for x in lat]) if has else None)  # type: ignore[index]
    return out


def embed_texts(texts: Sequence[str], dim: int, seed: int) -> np.ndarray:
    """Mean-pooled hashed word vectors (`paperflow.nn.hashtext`): appending words shifts the embedding."""
    from paperflow.nn.hashtext import embed_words

    cache: dict[str, np.ndarray] = {}
    out = np.empty((len(texts), dim), np.float32)
    for k, t in enumerate(texts):
        if t not in cache:
            cache[t] = embed_words(t.split(), dim=dim, seed=seed)
        out[k] = cache[t]
    return out


# ---- test-time corruptions (spec: noise 1x/2x signal, 50% dropout, occlusion, 50% word drop) ----------

IMAGE_CONDITIONS = ("noise1", "noise2", "dropout", "occlusion")


def corrupt_image(x: np.ndarray, condition: str, rng: np.random.Generator, dropout: float = 0.5) -> np.ndarray:
    """Corrupt image features. Noise k×: Gaussian with std k × the clean features' RMS; dropout: each
    dimension zeroed with probability `dropout`; occlusion: the second half of the dimensions zeroed."""
    if condition in ("clean", "worddrop"):
        return x.copy()
    if condition.startswith("noise"):
        k = float(condition[len("noise"):])
        rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
        return (x + k * rms * rng.standard_normal(x.shape)).astype(np.float32)
    if condition == "dropout":
        return (x * (rng.random(x.shape) >= dropout)).astype(np.float32)
    if condition == "occlusion":
        y = x.copy()
        y[:, x.shape[1] // 2:] = 0
        return y
    raise ValueError(f"unknown condition {condition!r}")


def drop_words(texts: Sequence[str], rate: float, rng: np.random.Generator) -> list[str]:
    out = []
    for t in texts:
        w = t.split()
        keep = rng.random(len(w)) >= rate
        out.append(" ".join(x for x, k in zip(w, keep) if k))
    return out
