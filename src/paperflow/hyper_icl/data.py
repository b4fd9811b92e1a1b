"""The tiny multimodal-ICL world (spec vision_language_b §5, tiny experiment; a [choice]).

An item is one "visual" token (a 32-d vector: a fixed seeded projection of the one-hot attributes colour (6),
shape (9 = 3 coarse × 3 fine) and count (1–4), plus Gaussian noise) and one answer token. An episode is
k demo items followed by a query; the task is never stated.

Tasks (label = an integer in 0..8; the answer tokens are shared by every task):
- pre-training: colour, fine shape, coarse shape, count, and their label-permuted variants (a fresh
  permutation of the task's labels per episode);
- held-out T1: colour under one fixed permutation π* (a derangement drawn from the data seed);
- held-out T2 (conditional): the fine shape if the query's colour is warm, else the count.

Files (directory written by `write_world`, read back by `load_split` / `load_world`):
- `world.json`: the generator parameters, π*, the warm colours, the fine→coarse map, task names, split sizes;
- `world.npz`: `proj` float32 [19, vis_dim] (the fixed attribute projection);
- `pretrain.npz`, `pretrain_val.npz`: episodes of n_demos + 1 items —
  `vis` float16 [E, n, vis_dim], `label` int8 [E, n], `colour`/`shape`/`count` int8 [E, n] (count in 1..4),
  `task` int8 [E] (index into PRETRAIN_TASKS), `perm` int8 [E, 9] (the episode's label permutation;
  identity for unpermuted tasks);
- `<T>_train.npz` (T ∈ {T1, T2}): the same episode arrays (`task` = -1, no `perm`), demos drawn from the
  task's own items, used by the students (query = last item) and their teacher;
- `<T>_val.npz`, `<T>_test.npz`: queries `vis` float16 [Q, vis_dim], `label`/`colour`/`shape`/`count` int8 [Q],
  and `demo_draws` demo sets for the teacher: `demo_vis` float16 [Q, D, k, vis_dim], `demo_label` int8 [Q, D, k]
  (D independent draws and orderings per query), and the demos' attributes `demo_colour`/`demo_shape`/`demo_count`
  int8 [Q, D, k] (the `hf_lm` backend renders items as words).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, write_json
from paperflow.core.seeding import stream

N_COLOUR, N_SHAPE, N_COUNT, N_COARSE = 6, 9, 4, 3
N_LABELS = 9  # answer tokens 0..8, shared by every task
N_ATTR = N_COLOUR + N_SHAPE + N_COUNT
PRETRAIN_TASKS = ("colour", "fine", "coarse", "count", "colour_perm", "fine_perm", "coarse_perm", "count_perm")
TASK_CLASSES = {"colour": N_COLOUR, "fine": N_SHAPE, "coarse": N_COARSE, "count": N_COUNT}
TARGETS = ("T1", "T2")
EPISODE_KEYS = ("vis", "label", "colour", "shape", "count")


def coarse_of(shape: np.ndarray) -> np.ndarray:
    """The 2-level hierarchy: fine shape s belongs to coarse class s // 3."""
    return np.asarray(shape) // 3


def projection(seed: int, vis_dim: int) -> np.ndarray:
    """The fixed seeded map from the 19 attribute one-hots to the visual token (unit-variance columns)."""
    return (stream(seed, "proj").standard_normal((N_ATTR, vis_dim)) / np.sqrt(3.0)).astype(np.float32)


def render(colour: np.ndarray, shape: np.ndarray, count: np.ndarray, proj: np.ndarray, noise: float,
           rng: np.random.Generator) -> np.ndarray:
    """Visual tokens [..., vis_dim] of items with the given attributes (count in 1..4)."""
    onehot = np.concatenate([np.eye(N_COLOUR)[colour], np.eye(N_SHAPE)[shape], np.eye(N_COUNT)[count - 1]], -1)
    v = onehot.astype(np.float32) @ proj
    return (v + noise * rng.standard_normal(v.shape)).astype(np.float32)


def sample_attrs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (rng.integers(0, N_COLOUR, shape), rng.integers(0, N_SHAPE, shape), rng.integers(1, N_COUNT + 1, shape))


def base_label(task: str, colour: np.ndarray, shape: np.ndarray, count: np.ndarray) -> np.ndarray:
    base = task.removesuffix("_perm")
    return {"colour": colour, "fine": shape, "coarse": coarse_of(shape), "count": count - 1}[base]


def target_label(target: str, colour: np.ndarray, shape: np.ndarray, count: np.ndarray, pi_star: np.ndarray,
                 warm: np.ndarray) -> np.ndarray:
    """T1: π*(colour); T2: fine shape if the colour is warm, else count − 1."""
    if target == "T1":
        return pi_star[colour]
    if target == "T2":
        return np.where(np.isin(colour, warm), shape, count - 1)
    raise ValueError(f"unknown target task {target!r}")


def derangement(rng: np.random.Generator, n: int) -> np.ndarray:
    """A permutation with no fixed point (π* must differ from the plain colour task on every colour)."""
    while True:
        p = rng.permutation(n)
        if not np.any(p == np.arange(n)):
            return p


def pretrain_episodes(n: int, n_items: int, proj: np.ndarray, noise: float, p_perm: float,
                      rng: np.random.Generator) -> dict[str, np.ndarray]:
    colour, shape, count = sample_attrs(rng, (n, n_items))
    base = rng.integers(0, 4, n)
    permuted = rng.random(n) < p_perm
    task = (base + 4 * permuted).astype(np.int8)
    label = np.empty((n, n_items), np.int64)
    perm = np.tile(np.arange(N_LABELS), (n, 1))
    for e in range(n):
        name = PRETRAIN_TASKS[task[e]]
        lab = base_label(name, colour[e], shape[e], count[e])
        if permuted[e]:
            k = TASK_CLASSES[name.removesuffix("_perm")]
            perm[e, :k] = rng.permutation(k)
            lab = perm[e][lab]
        label[e] = lab
    return {"vis": render(colour, shape, count, proj, noise, rng).astype(np.float16), "label": label.astype(np.int8),
            "colour": colour.astype(np.int8), "shape": shape.astype(np.int8), "count": count.astype(np.int8),
            "task": task, "perm": perm.astype(np.int8)}


def target_episodes(target: str, n: int, n_items: int, proj: np.ndarray, noise: float, pi_star: np.ndarray,
                    warm: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    colour, shape, count = sample_attrs(rng, (n, n_items))
    label = target_label(target, colour, shape, count, pi_star, warm)
    return {"vis": render(colour, shape, count, proj, noise, rng).astype(np.float16), "label": label.astype(np.int8),
            "colour": colour.astype(np.int8), "shape": shape.astype(np.int8), "count": count.astype(np.int8),
            "task": np.full(n, -1, np.int8)}


def target_queries(target: str, n: int, n_draws: int, k: int, proj: np.ndarray, noise: float, pi_star: np.ndarray,
                   warm: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """n queries, each with n_draws independent demo sets of k items (fresh draws and orderings)."""
    colour, shape, count = sample_attrs(rng, (n,))
    dc, ds, dn = sample_attrs(rng, (n, n_draws, k))
    return {"vis": render(colour, shape, count, proj, noise, rng).astype(np.float16),
            "label": target_label(target, colour, shape, count, pi_star, warm).astype(np.int8),
            "colour": colour.astype(np.int8), "shape": shape.astype(np.int8), "count": count.astype(np.int8),
            "demo_vis": render(dc, ds, dn, proj, noise, rng).astype(np.float16),
            "demo_label": target_label(target, dc, ds, dn, pi_star, warm).astype(np.int8),
            "demo_colour": dc.astype(np.int8), "demo_shape": ds.astype(np.int8), "demo_count": dn.astype(np.int8)}


def _save(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def write_world(out: str | Path, p: Mapping[str, Any]) -> dict[str, int]:
    """Generate every split from p (the data parameters) and write the directory `out` atomically."""
    seed, vis_dim, noise, k = int(p["seed"]), int(p["vis_dim"]), float(p["noise"]), int(p["n_demos"])
    proj = projection(seed, vis_dim)
    pi_star = derangement(stream(seed, "pi_star"), N_COLOUR)
    warm = np.asarray(p["warm_colours"], np.int64)
    counts: dict[str, int] = {}
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        _save(tmp / "world.npz", {"proj": proj})
        for split, n in (("pretrain", p["n_pretrain"]), ("pretrain_val", p["n_pretrain_val"])):
            _save(tmp / f"{split}.npz", pretrain_episodes(int(n), k + 1, proj, noise, float(p["p_permuted"]),
                                                          stream(seed, split)))
            counts[split] = int(n)
        for t in TARGETS:
            _save(tmp / f"{t}_train.npz", target_episodes(t, int(p["n_target_train"]), k + 1, proj, noise, pi_star,
                                                          warm, stream(seed, t, "train")))
            counts[f"{t}_train"] = int(p["n_target_train"])
            for split, n in (("val", p["n_val"]), ("test", p["n_test"])):
                _save(tmp / f"{t}_{split}.npz", target_queries(t, int(n), int(p["demo_draws"]), k, proj, noise,
                                                               pi_star, warm, stream(seed, t, split)))
                counts[f"{t}_{split}"] = int(n)
        write_json(tmp / "world.json", {"params": dict(p), "pi_star": pi_star.tolist(), "warm": warm.tolist(),
                                        "coarse_of_fine": coarse_of(np.arange(N_SHAPE)).tolist(),
                                        "pretrain_tasks": list(PRETRAIN_TASKS), "targets": list(TARGETS),
                                        "counts": counts})
    return counts


def load_world(root: str | Path) -> dict[str, Any]:
    meta = json.loads((Path(root) / "world.json").read_text())
    with np.load(Path(root) / "world.npz") as z:
        meta["proj"] = z["proj"]
    return meta


def load_split(root: str | Path, split: str) -> dict[str, np.ndarray]:
    """Read one split back, validating its schema; float16 visual tokens become float32, labels int64."""
    with np.load(Path(root) / f"{split}.npz") as z:
        d = {key: z[key] for key in z.files}
    missing = [key for key in EPISODE_KEYS if key not in d]
    if missing:
        raise ValueError(f"{split}: missing arrays {missing}")
    episodic = d["vis"].ndim == 3
    n = d["vis"].shape[0]
    for key in ("label", "colour", "shape", "count"):
        want = d["vis"].shape[:2] if episodic else (n,)
        if d[key].shape != want:
            raise ValueError(f"{split}: {key} has shape {d[key].shape}, expected {want}")
    if not episodic and ("demo_vis" not in d or d["demo_vis"].shape[:3] != d["demo_label"].shape):
        raise ValueError(f"{split}: query splits need demo_vis [Q, D, k, dim] and demo_label [Q, D, k]")
    if d["label"].min() < 0 or d["label"].max() >= N_LABELS:
        raise ValueError(f"{split}: labels outside 0..{N_LABELS - 1}")
    out = {key: (v.astype(np.float32) if v.dtype == np.float16 else v.astype(np.int64)) for key, v in d.items()}
    return out
