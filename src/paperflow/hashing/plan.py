"""Planning: the validated `hashing:` config section -> the list of runs and each job's params.
Rules and the CLI call the same functions, so a job reruns exactly when its parameters change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.hashing.data import FORMATS
from paperflow.hashing.methods import get as get_method


def fmt_rate(r: float) -> str:
    return f"{float(r):g}"


def settings(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(mode, rate-string) pairs: clean (sym 0) and every configured noisy setting."""
    out = [("sym", fmt_rate(r)) for r in cfg["noise"]["sym_rates"]]
    out += [("asym", fmt_rate(r)) for r in cfg["noise"]["asym_rates"] if float(r) > 0]
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def run_name(method: str, bits: int | str, mode: str, rate: str, seed: int | str) -> str:
    """Run id; the training seed is derived from the noise seed (see `train_seed_for`), not part of the name."""
    return f"{method}-L{bits}-{mode}{rate}-s{seed}"


def train_seed_for(cfg: Mapping[str, Any], seed: int | str) -> int:
    """Training seed paired with a noise seed: `grid.train_seed` + the noise seed's position in `noise.seeds`.

    Pairing (spec: noise seeds with training seeds 0, 1, 2) gives the r = 0 runs a real spread over seeds;
    a noise seed that is not in the list (a hand-run job) trains with `grid.train_seed`.
    """
    seeds = [int(s) for s in cfg["noise"]["seeds"]]
    base = int(cfg["grid"]["train_seed"])
    return base + seeds.index(int(seed)) if int(seed) in seeds else base


def runs(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    g = cfg["grid"]
    out = []
    for dataset in cfg["datasets"]:
        for method in g["methods"]:
            m = get_method(method)
            for bits in g["bits"]:
                for mode, rate in settings(cfg):
                    if not m.runs_at(cfg, bits, mode):
                        continue
                    for seed in cfg["noise"]["seeds"]:
                        out.append({"dataset": dataset, "method": method, "bits": bits, "mode": mode, "rate": rate,
                                    "seed": seed, "train_seed": train_seed_for(cfg, seed),
                                    "run": run_name(method, bits, mode, rate, seed)})
    return out


def train_jobs(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The training jobs: one per dataset x method x code length x noise setting, holding that setting's
    seeds (`jobs.group_seeds`, the tiny default: one process trains the seeds one after the other, so the
    interpreter, torch and accelerate start once), or one per seed (`group_seeds: false`, config/paper.yaml:
    one GPU job per run)."""
    out: list[dict[str, Any]] = []
    for r in runs(cfg):
        key = {k: r[k] for k in ("dataset", "method", "bits", "mode", "rate")}
        if cfg["jobs"]["group_seeds"] and out and {k: out[-1][k] for k in key} == key:
            out[-1]["seeds"].append(r["seed"])
        else:
            out.append({**key, "seeds": [r["seed"]]})
    return out


def seed_tag(seeds: list[int] | list[str]) -> str:
    """The seeds of one training job as they appear in its log and benchmark names (`10-11-12`)."""
    return "-".join(str(int(s)) for s in seeds)


def noise_records(cfg: Mapping[str, Any]) -> list[tuple[str, str, str, str, int]]:
    """(dataset, split, mode, rate, seed) of every record the runs need."""
    recs = set()
    for r in runs(cfg):
        recs.add((r["dataset"], "train", r["mode"], r["rate"], r["seed"]))
        recs.add((r["dataset"], "val", r["mode"], r["rate"], r["seed"] + cfg["noise"]["val_seed_offset"]))
    return sorted(recs)


def is_multilabel(cfg: Mapping[str, Any], dataset: str) -> bool:
    return bool(FORMATS[cfg["datasets"][dataset]["format"]]["multilabel"])


def synth_params(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    return {"format": cfg["datasets"][dataset]["format"], "synthetic": dict(cfg["synthetic"])}


def prep_params(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    d = cfg["datasets"][dataset]
    return {"format": d["format"], "n_train_ml": d["n_train_ml"], "n_val_ml": d["n_val_ml"], "split_seed": 0}


def record_name(split: str, mode: str, rate: str, seed: int | str) -> str:
    return f"{split}-{mode}-r{rate}-s{int(seed)}"


def noise_names(cfg: Mapping[str, Any]) -> list[str]:
    """Names of the noise records of one dataset (the same for every dataset: the runs do not depend on it)."""
    return sorted({record_name(sp, m, r, s) for _, sp, m, r, s in noise_records(cfg)})


def noise_params(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """One job per dataset writes every noise record its runs need (`{split}-{mode}-r{rate}-s{seed}`)."""
    return {"records": [{"name": record_name(sp, m, r, s), "split": sp, "mode": m, "rate": float(r), "seed": int(s)}
                        for ds, sp, m, r, s in noise_records(cfg) if ds == dataset]}


def train_params(cfg: Mapping[str, Any], dataset: str, method: str, bits: int | str, mode: str, rate: str,
                 seed: int | str) -> dict[str, Any]:
    """One training job: the run's coordinates, the shared training schedule and exactly the method's
    parameters (`Method.config_keys`, from the registry)."""
    train = {k: v for k, v in cfg["train"].items() if k not in ("weight_decay", "weight_decay_paper")}
    return {"method": method, "bits": int(bits), "mode": mode, "rate": float(rate), "seed": int(seed),
            "val_seed": int(seed) + cfg["noise"]["val_seed_offset"], "train_seed": train_seed_for(cfg, seed),
            "multilabel": is_multilabel(cfg, dataset), "train": train,
            "method_params": get_method(method).params(cfg)}


def train_job_params(cfg: Mapping[str, Any], dataset: str, method: str, bits: int | str, mode: str, rate: str,
                     seed: int | str | None = None) -> dict[str, Any]:
    """One training job: the parameters of each run it trains (`train_params`, one per seed: every seed of
    the noise setting, or only `seed`)."""
    seeds = [seed] if seed not in (None, "") else list(cfg["noise"]["seeds"])
    return {"cells": [train_params(cfg, dataset, method, bits, mode, rate, s) for s in seeds]}


def eval_runs(cfg: Mapping[str, Any], dataset: str, bits: int | str) -> list[str]:
    """The runs of one dataset at one code length (what one score job evaluates), in plan order."""
    return [r["run"] for r in runs(cfg) if r["dataset"] == dataset and int(r["bits"]) == int(bits)]


def chance_params(cfg: Mapping[str, Any], bits: int | str) -> dict[str, Any]:
    """Random-code baseline of one code length: `draws` seeded draws of uniform random ±1 codes."""
    return {"bits": int(bits), "draws": int(cfg["claims"]["chance_draws"]), "seed": 0}


def eval_params(cfg: Mapping[str, Any], dataset: str, bits: int | str) -> dict[str, Any]:
    """One score job: codes and mAP@all of every run of one dataset at one code length, and the
    chance level (random codes) on the same query/database at that length."""
    return {"bits": int(bits), "selections": list(cfg["train"]["selections"]), "runs": eval_runs(cfg, dataset, bits),
            "chance": chance_params(cfg, bits)}


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"runs": [{k: r[k] for k in ("dataset", "method", "bits", "mode", "rate", "seed", "run")} for r in runs(cfg)],
            "primary_selection": cfg["report"]["primary_selection"], "selections": list(cfg["train"]["selections"]),
            "datasets": {ds: {"format": d["format"], "synthetic": bool(d.get("synthetic", False))}
                         for ds, d in cfg["datasets"].items()},
            "roles": {m: get_method(m).role for m in cfg["grid"]["methods"]},
            "claims": dict(cfg["claims"])}


# ---- paths used by rules/hashing.smk (helpers live here: rules files hold rules only)


def pack_path(cfg: Mapping[str, Any], data_dir: str, dataset: str) -> str:
    """The .mat pack of `dataset`: generated by `synth` for synthetic datasets, else the configured path."""
    d = cfg["datasets"][dataset]
    return f"{data_dir}/hashing/raw/{dataset}.mat" if d.get("synthetic", False) else d["path"]


def eval_bits(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(dataset, code length) of every score job."""
    return sorted({(r["dataset"], int(r["bits"])) for r in runs(cfg)})


def eval_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/eval/{ds}/L{b}.json" for ds, b in eval_bits(cfg)]


def sidecar_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/noise/{ds}/{record_name(sp, m, r, s)}.json" for ds, sp, m, r, s in noise_records(cfg)]


def weights_paths(cfg: Mapping[str, Any], models: str, dataset: str, bits: int | str) -> list[str]:
    return [f"{models}/{dataset}/{run}/weights.npz" for run in eval_runs(cfg, dataset, bits)]


def train_record_paths(cfg: Mapping[str, Any], results: str, dataset: str, mode: str, rate: str, seed: int | str | None,
                       split: str) -> list[str]:
    """The noise records (`split` train or val) one training job reads, in the order of its seeds."""
    seeds = [seed] if seed not in (None, "") else list(cfg["noise"]["seeds"])
    off = cfg["noise"]["val_seed_offset"] if split == "val" else 0
    return [f"{results}/hashing/noise/{dataset}/{record_name(split, mode, rate, int(s) + off)}.npz" for s in seeds]


def chance_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/chance/{ds}-L{b}.json" for ds in sorted({r["dataset"] for r in runs(cfg)})
            for b in sorted({r["bits"] for r in runs(cfg) if r["dataset"] == ds})]

