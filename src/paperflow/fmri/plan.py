"""Planning: the exact parameters each job depends on, derived from the validated `fmri:` config.
Rules (`--params`) and the by-hand CLI (`--config` + the coordinates `--cohort` / `--tag`) both go
through these functions; their return values are the TypedDicts of `stages.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPACES = ("flat", "parcel", "volume")
COHORTS = ("pretrain", "state", "trait")


def geometry_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"surface": cfg["surface"], "volume_resolution_mm": cfg["volume_resolution_mm"], "flat": cfg["flat"],
            "parcel": cfg["parcel"], "volume": cfg["volume"]}


def synth_params(cfg: Mapping[str, Any], cohort: str) -> dict[str, Any]:
    s = dict(cfg["synth"])
    c = s.pop("cohorts")[cohort]
    s.pop("keep_nifti")
    return {**s, "cohort": cohort, "subjects": c["subjects"], "runs": c["runs"],
            "volume_resolution_mm": cfg["volume_resolution_mm"], "surface": cfg["surface"]}


def prep_params(cfg: Mapping[str, Any], cohort: str) -> dict[str, Any]:
    p = {"cohort": cohort, "new_tr": 1.0, "clip_frames": cfg["train"]["clip_frames"]}
    if cohort == "pretrain":
        p["n_val"] = cfg["synth"]["cohorts"]["pretrain"]["n_val"]
    return p


def run_tags(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every pretraining run: tag -> (space, seed, n_subjects (None = all), draw, steps)."""
    t = cfg["train"]
    n_train = cfg["synth"]["cohorts"]["pretrain"]["subjects"] - cfg["synth"]["cohorts"]["pretrain"]["n_val"]
    runs: dict[str, dict[str, Any]] = {}
    for space in t["spaces"]:
        for seed in t["seeds"]:
            runs[f"{space}-s{seed}"] = {"space": space, "seed": seed, "n_subjects": n_train, "draw": 0, "steps": t["steps"]}
    sc = cfg["scaling"]
    if sc["enabled"] and "flat" in t["spaces"]:
        for n in sc["subjects"]:
            n = min(n, n_train)
            draws = sc["draws"] if 2 * n <= n_train else 1
            for d in range(draws):
                runs[f"flat-n{n}-d{d}-s{t['seeds'][0]}"] = {"space": "flat", "seed": t["seeds"][0], "n_subjects": n,
                                                            "draw": d, "steps": sc["steps"]}
    return runs


def scaling_tags(cfg: Mapping[str, Any]) -> list[str]:
    return [k for k in run_tags(cfg) if "-n" in k]


def embed_tags(cfg: Mapping[str, Any]) -> list[str]:
    """Models whose frozen features are probed: pretrained per space + a random-init control
    (first space, normally flat)."""
    t = cfg["train"]
    return [f"{sp}-s{s}" for sp in t["spaces"] for s in t["seeds"]] + [f"{t['spaces'][0]}-rand"]


def train_params(cfg: Mapping[str, Any], tag: str) -> dict[str, Any]:
    t = cfg["train"]
    r = run_tags(cfg)[tag]
    lr = t["base_lr"][r["space"]] * t["lr_scale"]
    return {"tag": tag, **r, "batch_size": t["batch_size"], "base_lr": lr, "weight_decay": t["weight_decay"],
            "warmup_frac": t["warmup_frac"], "mask_ratio": t["mask_ratio"], "clip_frames": t["clip_frames"],
            "eval_every": min(t["eval_every"], r["steps"]), "val_clips": t["val_clips"], "model": t["model"]}


def embed_params(cfg: Mapping[str, Any], tag: str) -> dict[str, Any]:
    t = cfg["train"]
    space = tag.split("-")[0]
    seed = t["seeds"][0] if tag.endswith("-rand") else int(tag.rsplit("-s", 1)[1])
    return {"tag": tag, "space": space, "seed": seed, "random_init": tag.endswith("-rand"), "mask_ratio": t["mask_ratio"],
            "clip_frames": t["clip_frames"], "model": t["model"]}


def eval_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {**cfg["eval"], "tags": embed_tags(cfg)}


PROBE_BASELINES = "baselines"  # = benchmarks.BASELINES (plan.py stays free of numpy/sklearn imports)


def probe_tags(cfg: Mapping[str, Any]) -> list[str]:
    """The probe parts: the baselines, then one per embed tag."""
    return [PROBE_BASELINES, *embed_tags(cfg)]


def probe_params(cfg: Mapping[str, Any], tag: str) -> dict[str, Any]:
    if tag not in probe_tags(cfg):
        raise ValueError(f"unknown probe part {tag!r}; expected one of {probe_tags(cfg)}")
    return {**cfg["eval"], "tag": tag}


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The summary's inputs: run settings it prints and the claims' declared thresholds."""
    return {"tier": cfg["tier"], "train": cfg["train"], "scaling": cfg["scaling"], "synth": cfg["synth"],
            "flat": cfg["flat"], "claims": cfg["claims"]}


# Scheduling only (issue 24): the longest chain first. The tiny default is bound by
# geometry -> synth(pretrain) -> prep(pretrain) -> pretrain(volume) -> embed -> probe -> evaluate; Snakemake starts
# the ready job of highest `priority:` first, so the pretraining cohort goes before the evaluation cohorts
# and the main pretraining runs (volume, the slowest per step, then flat, then parcel) before the
# scaling runs, which only the report needs. No parameter or number depends on it.
SPACE_COST = {"volume": 3, "flat": 2, "parcel": 1}


def job_priority(cfg: Mapping[str, Any], stage: str, *, cohort: str | None = None, tag: str | None = None) -> int:
    """Snakemake `priority:` of an fmri job (higher starts first among ready jobs)."""
    if stage in ("synth", "prep"):
        return 10 if cohort == "pretrain" else 0
    if stage == "pretrain" and tag is not None:
        r = run_tags(cfg).get(tag)
        if r is None or "-n" in tag:  # scaling runs: off the critical path
            return 0
        return 10 + SPACE_COST.get(r["space"], 0)
    if stage == "embed" and tag is not None:
        return 5
    if stage == "probe" and tag is not None:  # a feature part right after its embed; the baselines whenever a core is free
        return 1 if tag == PROBE_BASELINES else 5
    return 0
