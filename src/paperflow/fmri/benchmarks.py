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


BASELINES = "baselines"  # the probe part that needs no MAE features (FC, raw, oracle, chance)


def _labels(state_dir: Path, trait_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Labels and subjects of the state clips and trait runs (read from the parcel datasets' columns)."""
    from paperflow.fmri.prep import load_splits

    sds = load_splits(Path(state_dir) / "parcel")["all"]
    tds = load_splits(Path(trait_dir) / "parcel")["all"]
    state = {"y": np.asarray(sds["label"]), "subject": np.asarray(sds["subject"])}
    trait = {"subject": np.asarray(tds["subject"]), "trait_group": np.asarray(tds["trait_group"]),
             "trait_age": np.asarray(tds["trait_age_bin"])}
    return state, trait


class _Probes:
    """Every probe of the table on the same subject-level splits: the splits depend only on the
    subjects, labels and `p` (seed, counts), so a probe run in another job gives the same numbers."""

    TRAITS = ("trait_group", "trait_age")

    def __init__(self, p: dict[str, Any], state_dir: Path, trait_dir: Path) -> None:
        self.p = p
        self.Cs = list(np.logspace(-4, 4, p["n_Cs"]))
        st, tr = _labels(state_dir, trait_dir)
        self.y, self.subj = st["y"], st["subject"]
        self.tsubj = tr["subject"]
        self.labels = {t: tr[t] for t in self.TRAITS}
        self.splits = subject_splits(self.subj, None, (4 / 6, 1 / 6, 1 / 6), p["state_splits"], p["seed"])
        self.tsplits = {t: subject_splits(self.tsubj, yy, (4 / 6, 1 / 6, 1 / 6), p["trait_splits"], p["seed"])
                        for t, yy in self.labels.items()}

    def state(self, X: np.ndarray) -> dict[str, Any]:
        p = self.p
        return probe(X, self.y, self.subj, self.splits, self.Cs, p["max_iter"], False, p["bootstrap"], p["seed"], "ridge")

    def trait(self, task: str, X: np.ndarray) -> dict[str, Any]:
        p = self.p
        return probe(X, self.labels[task], self.tsubj, self.tsplits[task], self.Cs, p["max_iter"], True, p["bootstrap"],
                     p["seed"], "logistic")


def _empty() -> dict[str, Any]:
    return {"tasks": {"state6": {}, "trait_group": {}, "trait_age": {}}}


def baseline_probes(p: dict[str, Any], state_dir: Path, trait_dir: Path) -> dict[str, Any]:
    """The rows that need no MAE: FC, raw clip means and the oracle, chance levels and sample counts."""
    from paperflow.fmri.data import load_runs

    pr = _Probes(p, state_dir, trait_dir)
    res: dict[str, Any] = {**_empty(), "chance": {}}
    par_clips, _ = load_runs(state_dir, "parcel", "all")
    flat_clips, _ = load_runs(state_dir, "flat", "all")
    res["chance"]["state6"] = chance(pr.y, balanced=True)
    res["n_state_clips"] = int(len(pr.y))
    res["n_state_subjects"] = int(len(np.unique(pr.subj)))
    st = res["tasks"]["state6"]
    st["FC (parcel clip)"] = pr.state(np.stack([fc_features(c) for c in par_clips]))
    st["raw flat clip-mean"] = pr.state(np.stack([c.mean(0) for c in flat_clips]))
    st["raw parcel clip-mean"] = pr.state(np.stack([c.mean(0) for c in par_clips]))
    tr_runs, _ = load_runs(trait_dir, "parcel", "all")
    truth = json.loads((Path(trait_dir) / "truth.json").read_text())
    fc_run = np.stack([fc_features(r) for r in tr_runs])
    oracle = np.asarray([[truth[s]["R12"]] for s in pr.tsubj])
    res["n_trait_subjects"] = int(len(np.unique(pr.tsubj)))
    for task, yy in pr.labels.items():
        res["chance"][task] = chance(yy, balanced=True)
    for task in pr.labels:
        res["tasks"][task]["FC (parcel, whole run)"] = pr.trait(task, fc_run)
        res["tasks"][task]["oracle true R[1,2]"] = pr.trait(task, oracle)
    return res


def feature_probes(p: dict[str, Any], embed: Path, state_dir: Path, trait_dir: Path) -> dict[str, Any]:
    """The rows of one frozen-MAE feature file (`embed/<tag>.npz`): state decoding and both traits."""
    pr = _Probes(p, state_dir, trait_dir)
    tag = Path(embed).name.removesuffix(".npz")
    res = _empty()
    with np.load(embed) as z:
        assert (z["state_y"] == pr.y).all() and (z["state_subject"] == pr.subj).all(), f"{embed}: state clips out of order"
        assert (z["trait_subject"] == pr.tsubj).all(), f"{embed}: trait runs out of order"
        res["tasks"]["state6"][f"MAE {tag}"] = pr.state(z["state_patch"].astype(np.float32))
        for task in pr.labels:
            res["tasks"][task][f"MAE {tag}"] = pr.trait(task, z["trait_tok"].astype(np.float32))
    return res


def merge_probes(base: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One metrics table from the baselines and the feature parts (a row present twice is an error)."""
    res = json.loads(json.dumps(base))
    for part in parts:
        for task, rows in part["tasks"].items():
            for name, row in rows.items():
                if name in res["tasks"][task]:
                    raise ValueError(f"probe row {task}/{name} appears twice")
                res["tasks"][task][name] = row
    return res


def run_benchmarks(p: dict[str, Any], embeds: list[Path], state_dir: Path, trait_dir: Path) -> dict[str, Any]:
    """The whole table in one process (what the pipeline assembles from its per-part probe jobs)."""
    return merge_probes(baseline_probes(p, state_dir, trait_dir),
                        [feature_probes(p, e, state_dir, trait_dir) for e in embeds])
