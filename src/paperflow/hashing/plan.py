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


def noise_params(cfg: Mapping[str, Any], mode: str, rate: str, seed: int | str) -> dict[str, Any]:
    return {"mode": mode, "rate": float(rate), "seed": int(seed)}


def train_params(cfg: Mapping[str, Any], dataset: str, method: str, bits: int | str, mode: str, rate: str,
                 seed: int | str) -> dict[str, Any]:
    """One training job: the run's coordinates, the shared training schedule and exactly the method's
    parameters (`Method.config_keys`, from the registry)."""
    train = {k: v for k, v in cfg["train"].items() if k not in ("weight_decay", "weight_decay_paper")}
    return {"method": method, "bits": int(bits), "mode": mode, "rate": float(rate), "seed": int(seed),
            "val_seed": int(seed) + cfg["noise"]["val_seed_offset"], "train_seed": train_seed_for(cfg, seed),
            "multilabel": is_multilabel(cfg, dataset), "train": train,
            "method_params": get_method(method).params(cfg)}


def eval_params(cfg: Mapping[str, Any], bits: int | str) -> dict[str, Any]:
    return {"bits": int(bits), "selections": list(cfg["train"]["selections"])}


def chance_params(cfg: Mapping[str, Any], bits: int | str) -> dict[str, Any]:
    """Random-code baseline of one code length: `draws` seeded draws of uniform random ±1 codes."""
    return {"bits": int(bits), "draws": int(cfg["claims"]["chance_draws"]), "seed": 0}


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


def eval_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/eval/{r['dataset']}/{r['run']}.json" for r in runs(cfg)]


def sidecar_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/noise/{ds}/{sp}-{m}-r{r}-s{s}.json" for ds, sp, m, r, s in noise_records(cfg)]


def chance_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/hashing/chance/{ds}-L{b}.json" for ds in sorted({r["dataset"] for r in runs(cfg)})
            for b in sorted({r["bits"] for r in runs(cfg) if r["dataset"] == ds})]


def val_record(cfg: Mapping[str, Any], results: str, dataset: str, mode: str, rate: str, seed: int | str) -> str:
    return f"{results}/hashing/noise/{dataset}/val-{mode}-r{rate}-s{int(seed) + cfg['noise']['val_seed_offset']}.npz"
