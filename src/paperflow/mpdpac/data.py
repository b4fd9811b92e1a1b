"""Synthetic scenes for the masked-diffusion captioning experiment (spec §1.4), written to one `.npz`.

A scene is a `grid × grid` raster of visual tokens: `2..max_objects` distinct objects (colour × shape),
the rest background (BG). Its caption lists the objects in raster order as `colour shape ,` and is
padded with EOS to a length drawn in `[len_min, len_max]` (training), so that long decoding stays in
distribution. The file holds both splits and the vocabulary (numpy unicode array, no pickle):

| key | dtype | shape | what |
|---|---|---|---|
| `vocab` | `<U32` | [V] | token strings; ids index this array |
| `meta` | `<U512` | [] | JSON: grid, n_colours, n_shapes, special-token ids, generator params |
| `{split}_visual` | int64 | [N, grid²] | visual token ids in raster order (BG or an object token) |
| `{split}_answer` | int64 | [N, len_max] | caption ids, EOS-padded; beyond `{split}_length` also EOS |
| `{split}_length` | int64 | [N] | answer length the sample was padded to (≤ len_max) |
| `{split}_objects` | int64 | [N, max_objects, 2] | (colour, shape) per object in raster order, −1 rows unused |
| `{split}_n_objects` | int64 | [N] | number of objects |

`load_scenes` is the one reader (it validates keys, dtypes and shapes and names the file in errors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "cyan", "pink")
SHAPES = ("circle", "square", "triangle", "star", "cross", "ring", "heart", "moon")
SPECIAL = ("[MASK]", "[EOS]", "[SEP]", "[BG]", ",")
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Vocab:
    """Token ids: specials, colour words, shape words, then one visual token per (colour, shape)."""

    n_colours: int
    n_shapes: int

    @property
    def tokens(self) -> list[str]:
        cols, shps = COLOURS[: self.n_colours], SHAPES[: self.n_shapes]
        return [*SPECIAL, *cols, *shps, *(f"<{c}_{s}>" for c in cols for s in shps)]

    def __len__(self) -> int:
        return len(SPECIAL) + self.n_colours + self.n_shapes + self.n_colours * self.n_shapes

    mask = 0
    eos = 1
    sep = 2
    bg = 3
    comma = 4

    def colour(self, c: int) -> int:
        return len(SPECIAL) + c

    def shape(self, s: int) -> int:
        return len(SPECIAL) + self.n_colours + s

    def visual(self, c: int, s: int) -> int:
        return len(SPECIAL) + self.n_colours + self.n_shapes + c * self.n_shapes + s

    def word_kind(self, tok: int) -> tuple[str, int]:
        """('colour', c) / ('shape', s) / ('comma', 0) / ('eos', 0) / ('other', tok)."""
        base = len(SPECIAL)
        if tok == self.comma:
            return "comma", 0
        if tok == self.eos:
            return "eos", 0
        if base <= tok < base + self.n_colours:
            return "colour", tok - base
        if base + self.n_colours <= tok < base + self.n_colours + self.n_shapes:
            return "shape", tok - base - self.n_colours
        return "other", tok


def generate_split(p: Mapping[str, Any], n: int, rng: np.random.Generator, fixed_length: int | None = None
                   ) -> dict[str, np.ndarray]:
    """`n` scenes. fixed_length: pad every answer to that length (the test split and the pilot variant)."""
    voc = Vocab(int(p["n_colours"]), int(p["n_shapes"]))
    g, kmax = int(p["grid"]), int(p["max_objects"])
    lmax = int(p["len_max"])
    if 3 * kmax > int(p["len_min"]):
        raise ValueError(f"len_min {p['len_min']} must hold {kmax} objects × 3 tokens")
    visual = np.full((n, g * g), voc.bg, np.int64)
    answer = np.full((n, lmax), voc.eos, np.int64)
    length = np.zeros(n, np.int64)
    objects = np.full((n, kmax, 2), -1, np.int64)
    n_obj = np.zeros(n, np.int64)
    pairs = np.array([(c, s) for c in range(voc.n_colours) for s in range(voc.n_shapes)])
    for i in range(n):
        k = int(rng.integers(int(p["min_objects"]), kmax + 1))
        cells = np.sort(rng.choice(g * g, size=k, replace=False))
        kinds = pairs[rng.choice(len(pairs), size=k, replace=False)]  # distinct objects: a repeat is an error
        toks: list[int] = []
        for j, (cell, (c, s)) in enumerate(zip(cells, kinds)):
            visual[i, cell] = voc.visual(int(c), int(s))
            objects[i, j] = (c, s)
            toks += [voc.colour(int(c)), voc.shape(int(s)), voc.comma]
        L = fixed_length if fixed_length is not None else int(rng.integers(int(p["len_min"]), lmax + 1))
        answer[i, : len(toks)] = toks
        length[i] = L
        n_obj[i] = k
    return {"visual": visual, "answer": answer, "length": length, "objects": objects, "n_objects": n_obj}


def write_scenes(p: Mapping[str, Any], out: str | Path, seed: int) -> dict[str, Any]:
    """Generate both splits and write them (atomically) to `out` (.npz). Returns a small summary."""
    from paperflow.core.io import atomic_path
    from paperflow.core.seeding import stream

    voc = Vocab(int(p["n_colours"]), int(p["n_shapes"]))
    arrays: dict[str, np.ndarray] = {}
    fixed = int(p["fixed_length"]) if p.get("fixed_length") else None
    arrays.update({f"train_{k}": v for k, v in generate_split(p, int(p["n_train"]), stream(seed, "train"), fixed).items()})
    arrays.update({f"test_{k}": v for k, v in
                   generate_split(p, int(p["n_test"]), stream(seed, "test"), int(p["len_max"])).items()})
    meta = {"grid": int(p["grid"]), "n_colours": voc.n_colours, "n_shapes": voc.n_shapes,
            "max_objects": int(p["max_objects"]), "len_min": int(p["len_min"]), "len_max": int(p["len_max"]),
            "special": {"mask": voc.mask, "eos": voc.eos, "sep": voc.sep, "bg": voc.bg, "comma": voc.comma}}
    arrays["vocab"] = np.array(voc.tokens, dtype="<U32")
    arrays["meta"] = np.array(json.dumps(meta), dtype="<U512")
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return {"n_train": int(p["n_train"]), "n_test": int(p["n_test"]), "vocab_size": len(voc),
            "mean_objects_test": float(arrays["test_n_objects"].mean())}


@dataclass
class Scenes:
    visual: np.ndarray
    answer: np.ndarray
    length: np.ndarray
    objects: np.ndarray
    n_objects: np.ndarray
    vocab: Vocab
    meta: dict[str, Any]

    def __len__(self) -> int:
        return int(self.visual.shape[0])

    def subset(self, n: int) -> "Scenes":
        return Scenes(self.visual[:n], self.answer[:n], self.length[:n], self.objects[:n], self.n_objects[:n],
                      self.vocab, self.meta)


def load_scenes(path: str | Path, split: str) -> Scenes:
    """Read one split of a scenes file; every key, dtype and shape is checked (errors name the file)."""
    path = Path(path)
    if split not in SPLITS:
        raise ValueError(f"{path}: unknown split {split!r} (have {SPLITS})")
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable scenes .npz ({e})") from None
    with z:
        need = ["vocab", "meta"] + [f"{split}_{k}" for k in ("visual", "answer", "length", "objects", "n_objects")]
        missing = [k for k in need if k not in z.files]
        if missing:
            raise ValueError(f"{path}: missing keys {missing}")
        meta = json.loads(str(z["meta"]))
        a = {k: z[f"{split}_{k}"] for k in ("visual", "answer", "length", "objects", "n_objects")}
        vocab = [str(t) for t in z["vocab"]]
    voc = Vocab(int(meta["n_colours"]), int(meta["n_shapes"]))
    if vocab != voc.tokens:
        raise ValueError(f"{path}: vocabulary does not match n_colours={voc.n_colours}, n_shapes={voc.n_shapes}")
    n = a["visual"].shape[0]
    shapes = {"visual": (n, meta["grid"] ** 2), "answer": (n, meta["len_max"]), "length": (n,),
              "objects": (n, meta["max_objects"], 2), "n_objects": (n,)}
    for k, shp in shapes.items():
        if a[k].dtype != np.int64 or a[k].shape != tuple(shp):
            raise ValueError(f"{path}: {split}_{k} has dtype {a[k].dtype} shape {a[k].shape}, want int64 {shp}")
    if a["visual"].min() < 0 or a["visual"].max() >= len(voc) or a["answer"].max() >= len(voc):
        raise ValueError(f"{path}: token ids outside the vocabulary of {len(voc)}")
    return Scenes(a["visual"], a["answer"], a["length"], a["objects"], a["n_objects"], voc, meta)
