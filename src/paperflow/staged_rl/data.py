"""The tiny slot world of staged_rl (spec vision_language_b §6, tiny experiment; our own [choice]).

A scene has `n_slots` slots, each empty or holding one of 4 colours (red, orange, green, blue). Its "image"
is one `feat_dim`-d vector per slot: the colour's prototype (zeros for an empty slot) plus Gaussian noise
σ_img. Red and orange have prototypes only `confusable_dist` apart, so telling them apart is genuinely hard;
the other prototypes are far apart. The "caption" is the exact colour list (one word per slot, `none` = empty).

Tasks (one prompt each; the completion format is in `model.py`):
- perc (D_perc): "how many <colour>?" as a 4-way MCQ (options: 4 distinct counts, the answer among them);
- text (D_text): "a + b ?" as tokens;
- vis (D_vis): "<c1> + <c2> ?" over the image (the sum of the two colours' counts);
- describe (caption-SFT arm): the colour-count vector of the image.

Files (a directory written by `write_world`, read back by `load_split` / `load_world`):
- `world.json`: the generator parameters, colour names, split sizes;
- `world.npz`: `protos` float32 [5, feat_dim] (rows 0..3 the colour prototypes, row 4 zeros = empty slot;
  index -1 therefore reads the empty prototype);
- `<split>.npz`, one per split in SPLITS, N rows each:
  `task` int8 [N] (TASKS index), `prefix` int8 [N] (0 image, 1 caption, 2 none: text sums),
  `colours` int8 [N, n_slots] (-1 empty, else 0..3), `feats` float32 [N, n_slots, feat_dim] (the image: one
  noisy draw), `q` int8 [N, 2] (perc: (colour, -1); vis: (c1, c2); text: (a, b); describe: (-1, -1)),
  `options` int8 [N, 4] (perc only; -1 otherwise), `see` int8 [N, 4] (the true counts the `<see>` span should
  hold: perc 1 value, vis 2, describe 4, text none; unused entries -1), `answer` int8 [N] (-1 for describe).

Splits: `warmup` (the shared supervised warm-up: image perception on easy scenes, caption-prefixed perception
and visual sums on full scenes, text sums with a + b ≤ warm_max_sum, image visual sums on easy scenes),
`perc_pool` (full-scene MCQs; the base model's filter picks D_perc from it, a seeded random subset of the same
size is the unfiltered D_perc), `text_rl`, `vis_rl`, `describe` (caption-SFT), `test_perc`, `test_text`,
`test_vis`. Easy scenes hold 1..easy_max_objects objects and never both red and orange; full scenes hold
1..n_slots objects of any colours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, write_json
from paperflow.core.seeding import stream

COLOURS = ("red", "orange", "green", "blue")
CONFUSABLE = (0, 1)  # red, orange
TASKS = ("perc", "text", "vis", "describe")
PERC, TEXT, VIS, DESCRIBE = range(4)
IMAGE, CAPTION, NONE = range(3)
SPLITS = ("warmup", "perc_pool", "text_rl", "vis_rl", "describe", "test_perc", "test_text", "test_vis")
MAX_OPERAND = 6  # text sums a, b in 0..6 (a visual sum of two colours' counts is at most n_slots)


def prototypes(seed: int, feat_dim: int, scale: float, confusable_dist: float) -> np.ndarray:
    """[5, feat_dim]: red, orange (= red + confusable_dist · a unit vector), green, blue, empty (zeros)."""
    rng = stream(seed, "protos")

    def unit() -> np.ndarray:
        v = rng.standard_normal(feat_dim)
        return v / np.linalg.norm(v)

    red = scale * unit()
    orange = red + confusable_dist * unit()
    green, blue = scale * unit(), scale * unit()
    return np.stack([red, orange, green, blue, np.zeros(feat_dim)]).astype(np.float32)


def scenes(n: int, n_slots: int, rng: np.random.Generator, easy: bool, easy_max: int) -> np.ndarray:
    """[n, n_slots] int8 colours (-1 empty). Easy: 1..easy_max objects, never both red and orange."""
    out = np.full((n, n_slots), -1, np.int8)
    hi = easy_max if easy else n_slots
    for i in range(n):
        k = int(rng.integers(1, hi + 1))
        slots = rng.choice(n_slots, size=k, replace=False)
        cols = rng.integers(0, len(COLOURS), size=k)
        if easy and {0, 1} <= set(cols.tolist()):
            drop = int(rng.integers(0, 2))  # keep one of red / orange: recolour the other as green or blue
            cols = np.where(cols == drop, rng.integers(2, 4, size=k), cols)
        out[i, slots] = cols
    return out


def render(colours: np.ndarray, protos: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Image [..., n_slots, feat_dim]: prototype (index -1 = empty row) + N(0, σ²)."""
    base = protos[colours.astype(np.int64)]
    return (base + sigma * rng.standard_normal(base.shape)).astype(np.float32)


def counts(colours: np.ndarray) -> np.ndarray:
    """[N, 4] int8 colour counts."""
    return np.stack([(colours == c).sum(-1) for c in range(len(COLOURS))], -1).astype(np.int8)


def mcq_options(n_true: int, rng: np.random.Generator, max_count: int) -> np.ndarray:
    """4 distinct counts in 0..max_count, the true one among them, distractors preferring near counts."""
    near = [c for c in range(n_true - 2, n_true + 3) if 0 <= c <= max_count and c != n_true]
    far = [c for c in range(max_count + 1) if c not in near and c != n_true]
    rng.shuffle(near)
    rng.shuffle(far)
    opts = np.array([n_true] + (near + far)[:3], np.int8)
    rng.shuffle(opts)
    return opts


def _empty(n: int, n_slots: int, feat_dim: int) -> dict[str, np.ndarray]:
    return {"task": np.zeros(n, np.int8), "prefix": np.zeros(n, np.int8),
            "colours": np.full((n, n_slots), -1, np.int8), "feats": np.zeros((n, n_slots, feat_dim), np.float32),
            "q": np.full((n, 2), -1, np.int8), "options": np.full((n, 4), -1, np.int8),
            "see": np.full((n, 4), -1, np.int8), "answer": np.full(n, -1, np.int8)}


def make_split(kind: str, n: int, p: Mapping[str, Any], protos: np.ndarray, rng: np.random.Generator,
               prefix: int = IMAGE, easy: bool = False) -> dict[str, np.ndarray]:
    """n items of one task kind ('perc', 'vis', 'text', 'describe') as the split arrays (module docstring)."""
    n_slots, sigma = int(p["n_slots"]), float(p["sigma_img"])
    d = _empty(n, n_slots, protos.shape[1])
    d["task"][:] = TASKS.index(kind)
    d["prefix"][:] = prefix if kind != "text" else NONE
    if kind == "text":
        hi = int(p["warm_max_sum"]) if easy else 2 * MAX_OPERAND
        ab = rng.integers(0, MAX_OPERAND + 1, size=(4 * n + 16, 2))
        ab = ab[ab.sum(1) <= hi][:n]
        d["q"][:] = ab
        d["answer"][:] = ab.sum(1)
        return d
    cols = scenes(n, n_slots, rng, easy, int(p["easy_max_objects"]))
    d["colours"][:] = cols
    d["feats"][:] = render(cols, protos, sigma, rng)
    cnt = counts(cols)
    if kind == "perc":
        c = rng.integers(0, len(COLOURS), size=n)
        d["q"][:, 0] = c
        n_true = cnt[np.arange(n), c]
        d["see"][:, 0] = n_true
        d["answer"][:] = n_true
        d["options"][:] = np.stack([mcq_options(int(k), rng, n_slots) for k in n_true])
    elif kind == "vis":
        pairs = np.array([(a, b) for a in range(len(COLOURS)) for b in range(len(COLOURS)) if a != b])
        c12 = pairs[rng.integers(0, len(pairs), size=n)]
        d["q"][:] = c12
        s = np.stack([cnt[np.arange(n), c12[:, 0]], cnt[np.arange(n), c12[:, 1]]], 1)
        d["see"][:, :2] = s
        d["answer"][:] = s.sum(1)
    elif kind == "describe":
        d["see"][:] = cnt
    else:
        raise ValueError(f"unknown task kind {kind!r}")
    return d


def concat(parts: list[dict[str, np.ndarray]], rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = rng.permutation(len(out["task"]))
    return {k: v[order] for k, v in out.items()}


def build(p: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]]]:
    """(prototypes, {split: arrays}) from the data parameters."""
    seed = int(p["seed"])
    protos = prototypes(seed, int(p["feat_dim"]), float(p["proto_scale"]), float(p["confusable_dist"]))
    w = int(p["n_warmup"]) // 5
    rw = stream(seed, "warmup")
    splits = {
        "warmup": concat([make_split("perc", w, p, protos, rw, IMAGE, easy=True),
                          make_split("vis", w, p, protos, rw, IMAGE, easy=True),
                          make_split("perc", w, p, protos, rw, CAPTION),
                          make_split("vis", w, p, protos, rw, CAPTION),
                          make_split("text", w, p, protos, rw, easy=True)], rw),
        "perc_pool": make_split("perc", int(p["n_perc_pool"]), p, protos, stream(seed, "perc_pool")),
        "text_rl": make_split("text", int(p["n_text"]), p, protos, stream(seed, "text_rl")),
        "vis_rl": make_split("vis", int(p["n_vis"]), p, protos, stream(seed, "vis_rl")),
        "describe": make_split("describe", int(p["n_describe"]), p, protos, stream(seed, "describe")),
    }
    for kind in ("perc", "text", "vis"):
        splits[f"test_{kind}"] = make_split(kind, int(p["n_test"]), p, protos, stream(seed, "test", kind))
    return protos, splits


def write_world(out: str | Path, p: Mapping[str, Any]) -> dict[str, int]:
    """Generate every split and write the directory `out` atomically; returns the split sizes."""
    protos, splits = build(p)
    sizes = {k: int(len(v["task"])) for k, v in splits.items()}
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        np.savez(tmp / "world.npz", protos=protos)
        for name, arrays in splits.items():
            np.savez(tmp / f"{name}.npz", **arrays)
        write_json(tmp / "world.json", {"params": dict(p), "colours": list(COLOURS), "tasks": list(TASKS),
                                        "confusable": list(CONFUSABLE), "sizes": sizes,
                                        "red_orange_distance": float(np.linalg.norm(protos[0] - protos[1]))})
    return sizes


def load_split(root: str | Path, name: str) -> dict[str, np.ndarray]:
    with np.load(Path(root) / f"{name}.npz") as z:
        return {k: z[k] for k in z.files}


def load_world(root: str | Path) -> dict[str, Any]:
    meta = json.loads((Path(root) / "world.json").read_text())
    with np.load(Path(root) / "world.npz") as z:
        meta["protos"] = z["protos"]
    return meta


def subset(d: Mapping[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[idx] for k, v in d.items()}
