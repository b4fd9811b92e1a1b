"""Loading the extracted multi-view dataset into memory for LAM training / evaluation (tiny profile).

Clips (spec a.6): every start t with t + k <= N - 1, per selected view slot
`view_mask = has_view & frame_ok[:, t] & frame_ok[:, t + k]`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.robotics.bridge import load_split


@dataclass
class Split:
    images: np.ndarray  # (F, V, S, S, 3) uint8: all frames of all episodes, selected slots only
    offsets: np.ndarray  # (E,) first frame index of each episode in `images`
    lengths: np.ndarray  # (E,) frames per episode
    frame_ok: np.ndarray  # (F, V) bool (already and-ed with has_view)
    action_rel: list[np.ndarray]  # per episode (N-1, 7)
    tasks: list[str]  # per episode: task folder (template)
    instructions: list[str]
    episode_ids: list[str]
    slots: list[int]


def load_episodes(mv_dir: str | Path, split: str, slots: list[int]) -> Split:
    ds = load_split(mv_dir, split)
    imgs, oks, acts, tasks, instr, ids, lens = [], [], [], [], [], [], []
    for i in range(len(ds)):
        ep = ds[i]
        im = np.asarray(ep["images"], dtype=np.uint8)[:, slots]
        hv = np.asarray(ep["has_view"], bool)[slots]
        fo = np.asarray(ep["frame_ok"], bool)[slots].T & hv[None]
        imgs.append(im)
        oks.append(fo)
        acts.append(np.asarray(ep["action_rel"], np.float64))
        tasks.append(str(ep["task"]))
        instr.append(str(ep["instruction"]))
        ids.append(str(ep["episode_id"]))
        lens.append(len(im))
    lengths = np.array(lens, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if lens else np.zeros(0, np.int64)
    S = ds.features["images"].shape[2]
    images = np.concatenate(imgs) if imgs else np.zeros((0, len(slots), S, S, 3), np.uint8)
    frame_ok = np.concatenate(oks) if oks else np.zeros((0, len(slots)), bool)
    return Split(images, offsets, lengths, frame_ok, acts, tasks, instr, ids, slots)


def clips(sp: Split, k: int, stride: int = 1) -> dict[str, np.ndarray]:
    """Clip index: episode, t, frame indices of o_t / o_t+k, view mask (n, V), window action sums."""
    ep, t, i0, i1, mask, a6, g = [], [], [], [], [], [], []
    for e, (off, n) in enumerate(zip(sp.offsets, sp.lengths)):
        for s in range(0, n - k, stride):
            ep.append(e)
            t.append(s)
            i0.append(off + s)
            i1.append(off + s + k)
            mask.append(sp.frame_ok[off + s] & sp.frame_ok[off + s + k])
            a = sp.action_rel[e][s:s + k]
            a6.append(a[:, :6].sum(0))
            g.append(a[-1, 6])
    V = len(sp.slots)
    return {"episode": np.array(ep, np.int64), "t": np.array(t, np.int64), "i0": np.array(i0, np.int64),
            "i1": np.array(i1, np.int64), "mask": np.array(mask, bool).reshape(-1, V),
            "action6": np.array(a6, np.float64).reshape(-1, 6), "gripper": np.array(g, np.float64)}


def read_stats(mv_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(mv_dir) / "stats.json").read_text())
