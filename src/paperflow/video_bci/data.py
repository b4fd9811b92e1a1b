"""Frame-vector videos, 5-way questions with decisive frames, and the fixed prior-hypothesis generator
(spec vision_language_b §7, tiny experiment; every choice here is ours [choice]/[recon]).

Video: T = 8 frames. A frame is a 16-d vector: 6 object-presence bits, a 2-bit motion code, 8 zero dims,
plus Gaussian noise (σ = `noise`) on all 16 dims.

Questions (5-way MCQ, options 0..4):
- qtype 0, "which object appears first?" — options are objects 0..4 (object 5 is never an option). The answer
  y first appears at frame f ∈ {0, 1, 2}, no other option object appears at or before f; decisive frames
  D = {0, …, f} (they show y and that nothing else came earlier).
- qtype 1, "in how many frames is object k?" — k ∈ 0..5 appears in exactly c ∈ {0, 1, 2, 3} frames;
  the answer is c (option 4, "4 or more", is never correct); D = the frames with object k.
|D| ≤ 3, so a 3-frame trace can cover it.

Prior generator (`prior_source: fixed`): N hypotheses per item, each an answer and a 3-frame trace.
A correct prior's trace covers D; a wrong prior's trace misses at least one decisive frame (when D is empty
it is 3 random frames). m = number of correct priors:
- easy items (1 − p_hard): m ~ Binomial(N, p_easy_correct); wrong priors pick uniform wrong options;
- hard items (p_hard): m ∈ {0, 1, 2, 3} with `hard_m_probs`; the wrong priors all attend one salient
  distractor frame (a non-decisive frame whose motion code is set to 3) and share ONE biased wrong answer,
  so the majority is wrong by construction; m = 0 (10% of hard items) leaves y in no prior.
Priors are shuffled per item. `majority` is the mode of the prior answers, ties broken at random (seeded):
the majority-vote arm (a) answers it, and it defines the minority/retention subsets.

Files (`write_data(out, params)`): `<split>.npz` for split ∈ {train, val, test} with
  frames float32 [n, T, 16]; qtype int8 [n]; qobj int8 [n] (k for qtype 1, -1 for qtype 0);
  y int8 [n]; decisive uint8 [n, T] (0/1); hard uint8 [n]; distractor int8 [n] (frame, -1 on easy items);
  prior_ans int8 [n, N] (−1: an unparsed self-sampled prior); prior_trace uint8 [n, N, T] (0/1); majority int8 [n];
  absent uint8 [n] (y in no prior);
  and `schema.json` (this description as data: keys, dtypes, shapes, the generator parameters, split stats).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, write_json
from paperflow.core.seeding import stream

N_OBJ, N_OPT, FRAME_DIM, MOTION_BITS = 6, 5, 16, 2
SPLITS = ("train", "val", "test")
KEYS = {  # key: (dtype, shape in words)
    "frames": ("float32", "[n, T, 16]"), "qtype": ("int8", "[n]"), "qobj": ("int8", "[n]"), "y": ("int8", "[n]"),
    "decisive": ("uint8", "[n, T]"), "hard": ("uint8", "[n]"), "distractor": ("int8", "[n]"),
    "prior_ans": ("int8", "[n, N]"), "prior_trace": ("uint8", "[n, N, T]"), "majority": ("int8", "[n]"),
    "absent": ("uint8", "[n]"),
}


def _video(rng: np.random.Generator, T: int, qtype: int) -> tuple[np.ndarray, int, int, np.ndarray]:
    """Presence bits [T, N_OBJ], question object, answer, decisive mask [T] for one item."""
    pres = np.zeros((T, N_OBJ), dtype=np.uint8)
    dec = np.zeros(T, dtype=np.uint8)
    if qtype == 0:
        y = int(rng.integers(N_OPT))
        f = int(rng.integers(3))
        pres[f, y] = 1
        pres[f + 1:, y] = rng.random(T - f - 1) < 0.5
        for o in range(N_OPT):
            if o == y:
                continue
            start = int(rng.integers(f + 1, T + 2))  # first appearance after f (≥ T: never)
            if start < T:
                pres[start, o] = 1
                pres[start + 1:, o] = rng.random(T - start - 1) < 0.5
        pres[:, N_OPT] = rng.random(T) < 0.4  # object 5: not an option, may appear anywhere
        dec[: f + 1] = 1
        return pres, -1, y, dec
    k = int(rng.integers(N_OBJ))
    c = int(rng.integers(4))
    pres[:, :] = rng.random((T, N_OBJ)) < 0.4
    pres[:, k] = 0
    where = rng.choice(T, size=c, replace=False)
    pres[where, k] = 1
    dec[where] = 1
    return pres, k, c, dec


def _trace(rng: np.random.Generator, T: int, size: int, dec: np.ndarray, correct: bool,
           distractor: int) -> np.ndarray:
    """A prior's trace (0/1 [T]): covers D if correct, else misses ≥ 1 decisive frame (+ the distractor frame)."""
    d_idx = np.flatnonzero(dec)
    tr = np.zeros(T, dtype=np.uint8)
    if correct:
        rest = np.setdiff1d(np.arange(T), d_idx)
        tr[d_idx] = 1
        tr[rng.choice(rest, size=max(0, size - len(d_idx)), replace=False)] = 1
        return tr
    allowed = np.arange(T)
    if len(d_idx):
        allowed = np.setdiff1d(allowed, [int(rng.choice(d_idx))])
    must = [distractor] if distractor >= 0 else []
    allowed = np.setdiff1d(allowed, must)
    tr[must] = 1
    tr[rng.choice(allowed, size=size - len(must), replace=False)] = 1
    return tr


def make_split(params: Mapping[str, Any], split: str, n: int) -> dict[str, np.ndarray]:
    """One split's arrays (schema: module docstring). Deterministic in (params['seed'], split)."""
    T, N, size = int(params["frames"]), int(params["n_priors"]), int(params["trace_frames"])
    rng = stream(int(params["seed"]), "video_bci", split)
    m_probs = np.asarray(params["hard_m_probs"], dtype=float)
    m_probs = m_probs / m_probs.sum()
    out: dict[str, list[Any]] = {k: [] for k in KEYS}
    for _ in range(n):
        qtype = int(rng.random() < float(params["p_count"]))
        pres, k, y, dec = _video(rng, T, qtype)
        motion = rng.integers(0, 3, size=T)  # codes 0..2; code 3 marks the hard items' salient distractor frame
        hard = bool(rng.random() < float(params["p_hard"]))
        distractor = -1
        if hard:
            distractor = int(rng.choice(np.flatnonzero(dec == 0)))
            motion[distractor] = 3
            m = int(rng.choice(len(m_probs), p=m_probs))
            wrong_opts = [o for o in range(N_OPT) if o != y]
            biased = int(rng.choice(wrong_opts))
            ans = [y] * m + [biased] * (N - m)
        else:
            m = int(rng.binomial(N, float(params["p_easy_correct"])))
            ans = [y] * m + [int(rng.choice([o for o in range(N_OPT) if o != y])) for _ in range(N - m)]
        traces = [_trace(rng, T, size, dec, a == y, distractor) for a in ans]
        order = rng.permutation(N)
        ans_arr = np.asarray(ans, dtype=np.int8)[order]
        tr_arr = np.stack(traces)[order]
        counts = np.bincount(ans_arr, minlength=N_OPT)
        modes = np.flatnonzero(counts == counts.max())
        bits = np.concatenate([pres, ((motion[:, None] >> np.arange(MOTION_BITS)) & 1).astype(np.uint8),
                               np.zeros((T, FRAME_DIM - N_OBJ - MOTION_BITS), dtype=np.uint8)], axis=1)
        frames = bits.astype(np.float32) + float(params["noise"]) * rng.standard_normal((T, FRAME_DIM)).astype(np.float32)
        for key, val in (("frames", frames), ("qtype", qtype), ("qobj", k), ("y", y), ("decisive", dec),
                         ("hard", int(hard)), ("distractor", distractor), ("prior_ans", ans_arr),
                         ("prior_trace", tr_arr), ("majority", int(rng.choice(modes))), ("absent", int(m == 0))):
            out[key].append(val)
    return {k: np.asarray(v, dtype=KEYS[k][0]) for k, v in out.items()}


def split_stats(d: Mapping[str, np.ndarray]) -> dict[str, float]:
    maj_right = d["majority"] == d["y"]
    return {"n": int(len(d["y"])), "hard": float(d["hard"].mean()), "majority_right": float(maj_right.mean()),
            "minority": float(((~maj_right) & (d["absent"] == 0)).mean()), "absent": float(d["absent"].mean()),
            "qtype_count": float(d["qtype"].mean())}


def write_data(out: str | Path, params: Mapping[str, Any]) -> dict[str, Any]:
    """Write the three splits and schema.json into directory `out`; returns the split statistics."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stats = {}
    for split in SPLITS:
        d = make_split(params, split, int(params[f"n_{split}"]))
        with atomic_path(out / f"{split}.npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **d)
        stats[split] = split_stats(d)
    write_json(out / "schema.json", {
        "description": (__doc__ or "").strip(), "params": dict(params),
        "keys": {k: {"dtype": dt, "shape": sh} for k, (dt, sh) in KEYS.items()},
        "T": int(params["frames"]), "N": int(params["n_priors"]), "options": N_OPT, "objects": N_OBJ,
        "splits": stats})
    return stats


def load_split(data: str | Path, split: str) -> dict[str, np.ndarray]:
    with np.load(Path(data) / f"{split}.npz") as z:
        return {k: z[k] for k in z.files}


def prior_stats(d: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per item: p̂ [n, 5] (answer histogram of the priors), Ĥ [n] (entropy / log min(N, 5)), the mode.
    A prior answer of −1 (a self-sampled prior that could not be parsed) is left out of p̂; an item with no
    parsed prior has p̂ = 0 and Ĥ = 0."""
    N = d["prior_ans"].shape[1]
    ans = d["prior_ans"].astype(int)
    valid = ans >= 0
    onehot = np.eye(N_OPT)[np.where(valid, ans, 0)]  # [n, N, 5]
    if valid.all():
        p = onehot.mean(axis=1)
    else:
        p = (onehot * valid[..., None]).sum(axis=1) / np.maximum(valid.sum(axis=1), 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1) / np.log(min(N, N_OPT))
    return {"p_hat": p, "H_hat": h, "majority": d["majority"].astype(int)}
