"""Selection of the CPU-budget training knobs on the VALIDATION split (driven by bench/expalign_select.py).

The grid, arms and seed are pre-declared in the config (`expalign.selection`); every cell trains each of
those arms on the train split with the cell's knobs (everything else from the config) and scores pointing
accuracy on the val split (held out from the generated training images). The score of a cell is the mean
validation pointing over the arms — one number for all arms, so the choice favours no arm. The test split
is never opened here: `run` reads train, val, the text cache and meta.json only.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("paperflow.expalign.select")

# the knobs a cell may set (keys of expalign.train)
KNOBS = ("lr", "steps")
# the files selection reads from the prepared data directory (never test.safetensors)
INPUTS = ("train.safetensors", "val.safetensors", "text.safetensors", "meta.json")


def grid(sel: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared cells, in declaration order (steps outer, lr inner): ties go to the earlier cell."""
    return [{"steps": int(s), "lr": float(lr)} for s in sel["steps"] for lr in sel["lr"]]


def pick(rows: Sequence[Mapping[str, Any]], tol: float = 1e-9) -> Mapping[str, Any]:
    """The row with the highest `score`, the first one on a tie: a later row must beat the best so far by
    more than `tol` (scores are means of hit fractions; equal hit counts summed in another order differ in
    the last bit). A missing or NaN score is an error: a cell that could not be scored must not be skipped
    silently."""
    if not rows:
        raise ValueError("selection: no cells to choose from")
    best = None
    for r in rows:
        s = r.get("score")
        if s is None or not math.isfinite(float(s)):
            raise ValueError(f"selection: cell {dict(r.get('cell', {}))} has no finite score ({s!r})")
        if best is None or float(s) > float(best["score"]) + tol:
            best = r
    assert best is not None
    return best


def with_knobs(cfg: Mapping[str, Any], cell: Mapping[str, Any]) -> dict[str, Any]:
    """The study config with the cell's knobs in `train`."""
    bad = set(cell) - set(KNOBS)
    if bad:
        raise ValueError(f"selection: {sorted(bad)} are not selectable knobs {KNOBS}")
    return {**cfg, "train": {**dict(cfg["train"]), **dict(cell)}}


def val_pointing(model: Any, val: Any, txt: Mapping[str, Any], rare_p: Any) -> float:
    """Pointing accuracy on the val split over every (image, positive phrase) pair."""
    from paperflow.expalign.evaluate import pointing, score_maps

    S = score_maps(model, val, txt)
    return float(pointing(S, val, rare_p)["acc"]["all"])


def run(cfg: Mapping[str, Any], data_dir: Path, *,
        progress: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Score every declared cell on the val split; returns {"cells": [...], "choice": {...}, ...}."""
    import numpy as np
    import torch

    from paperflow.core.io import read_json
    from paperflow.expalign import plan
    from paperflow.expalign.data import read_split
    from paperflow.expalign.text import read_text_embeddings
    from paperflow.expalign.train import text_tensors, train

    sel = cfg["selection"]
    data_dir = Path(data_dir)
    tr_path, val_path, text_path, meta_path = (data_dir / f for f in INPUTS)
    train_split, val = read_split(tr_path), read_split(val_path)
    cats = read_json(meta_path)["categories"]
    rare_p = np.array([c["frequency"] == "r" for c in cats])
    seed = int(sel["seed"])
    rows: list[dict[str, Any]] = []
    for cell in grid(sel):
        c = with_knobs(cfg, cell)
        arms: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for arm in sel["arms"]:
            params = plan.train_params(c, arm, seed)
            text = read_text_embeddings(text_path, params["arm"]["prompt"])
            t = time.process_time()
            model, _ = train(params, train_split, text, ckpt_dir=None)
            cpu[arm] = time.process_time() - t
            assert model is not None
            with torch.no_grad():
                arms[arm] = val_pointing(model, val, text_tensors(text), rare_p)
        row = {"cell": cell, "val_pointing": arms, "score": float(np.mean(list(arms.values()))),
               "train_cpu_s": cpu}
        rows.append(row)
        if progress:
            progress(f"steps {cell['steps']} lr {cell['lr']:g}: " +
                     ", ".join(f"{a} {v:.3f}" for a, v in arms.items()) + f" -> mean {row['score']:.3f}")
    best = pick(rows)
    return {"metric": f"mean over arms {list(sel['arms'])} of validation pointing accuracy (seed {seed})",
            "n_val": int(len(val.images)), "n_train": int(len(train_split.images)),
            "val_pairs": int(len(np.unique(val.inst_image * len(cats) + val.inst_cat))),
            "cells": rows, "choice": best["cell"], "choice_score": best["score"]}
