"""Brainmarks-style benchmark table: every probe on the same subject-level splits.

state6 (6 classes, accuracy): frozen MAE per-patch tokens (time-averaged) -> ridge probe; FC of the
  16-frame parcel clip (upper triangle) -> ridge; raw clip-mean flat pixels / parcels -> ridge.
trait_group (2) and trait_age (tertiles, 3), balanced accuracy: MAE mean token over all windows of
  the rest run -> StandardScaler + logistic; whole-run parcel FC -> logistic; oracle = true R_s[1,2].
Regularization is chosen on the validation subjects, then refit on train + val; test is never used
for selection. Split 0 is the fixed split (bootstrap std); the rest are re-splits (mean +- std).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.fmri.evaluate import chance, fc_features, probe, subject_splits


def run_benchmarks(p: dict[str, Any], embeds: list[Path], state_dir: Path, trait_dir: Path) -> dict[str, Any]:
    from paperflow.fmri.data import load_runs

    Cs = list(np.logspace(-4, 4, p["n_Cs"]))
    seed = p["seed"]
    res: dict[str, Any] = {"tasks": {"state6": {}, "trait_group": {}, "trait_age": {}}, "chance": {}}

    # ---- state
    par_clips, par_ds = load_runs(state_dir, "parcel", "all")
    flat_clips, _ = load_runs(state_dir, "flat", "all")
    y = np.asarray(par_ds["label"])
    subj = np.asarray(par_ds["subject"])
    splits = subject_splits(subj, None, (4 / 6, 1 / 6, 1 / 6), p["state_splits"], seed)
    res["chance"]["state6"] = chance(y, balanced=True)
    res["n_state_clips"] = int(len(y))
    res["n_state_subjects"] = int(len(np.unique(subj)))
    st = res["tasks"]["state6"]

    def sp(X, kind="ridge"):
        return probe(X, y, subj, splits, Cs, p["max_iter"], False, p["bootstrap"], seed, kind)

    st["FC (parcel clip)"] = sp(np.stack([fc_features(c) for c in par_clips]))
    st["raw flat clip-mean"] = sp(np.stack([c.mean(0) for c in flat_clips]))
    st["raw parcel clip-mean"] = sp(np.stack([c.mean(0) for c in par_clips]))
    # ---- traits
    tr_runs, tr_ds = load_runs(trait_dir, "parcel", "all")
    tsubj = np.asarray(tr_ds["subject"])
    truth = json.loads((Path(trait_dir) / "truth.json").read_text())
    labels = {"trait_group": np.asarray(tr_ds["trait_group"]), "trait_age": np.asarray(tr_ds["trait_age_bin"])}
    fc_run = np.stack([fc_features(r) for r in tr_runs])
    oracle = np.asarray([[truth[s]["R12"]] for s in tsubj])
    res["n_trait_subjects"] = int(len(np.unique(tsubj)))
    tsplits = {}
    for task, yy in labels.items():
        tsplits[task] = subject_splits(tsubj, yy, (4 / 6, 1 / 6, 1 / 6), p["trait_splits"], seed)
        res["chance"][task] = chance(yy, balanced=True)

    def tp(task, X):
        return probe(X, labels[task], tsubj, tsplits[task], Cs, p["max_iter"], True, p["bootstrap"], seed, "logistic")

    for task in labels:
        res["tasks"][task]["FC (parcel, whole run)"] = tp(task, fc_run)
        res["tasks"][task]["oracle true R[1,2]"] = tp(task, oracle)
    # ---- frozen MAE features
    for e in embeds:
        tag = Path(e).name.removesuffix(".npz")
        with np.load(e) as z:
            assert (z["state_y"] == y).all() and (z["state_subject"] == subj).all(), f"{e}: state clips out of order"
            assert (z["trait_subject"] == tsubj).all(), f"{e}: trait runs out of order"
            st[f"MAE {tag}"] = sp(z["state_patch"].astype(np.float32))
            for task in labels:
                res["tasks"][task][f"MAE {tag}"] = tp(task, z["trait_tok"].astype(np.float32))
    return res
