"""Planning: which jobs the `mpdpac` config asks for and exactly which parameters each depends on.
Rules and the generated CLI (`--config` plus the coordinates `--seed --condition`) both call these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def conditions(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every decoding condition by name: the main grid, then the MRS (long visual prefix) conditions."""
    d = cfg["decoding"]
    out: dict[str, dict[str, Any]] = {}
    for kind in ("conditions", "mrs_conditions"):
        for name, c in d[kind].items():
            out[name] = {"name": name, "kind": "mrs" if kind == "mrs_conditions" else "main",
                         "answer_len": int(c["answer_len"]), "tokens_per_step": int(c["tokens_per_step"]),
                         "visual_len": c.get("visual_len")}
    return out


SHUFFLED = "shuffled_image"


def _g(x: float) -> str:
    return f"{x:g}"


def arms(cfg: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The arms of a condition. main: baseline, MPS (paper prior) per λ, the random-subspace control per
    λ, the calibrated-prior ablation, MRS at the largest β, MPS+MRS. mrs: baseline, MRS per β, the off-spec
    s_max arms, MPS alone and MPS+MRS."""
    d = cfg["decoding"]
    both = d["combined"]
    base = [{"name": "base", "prior": None, "lam": 0.0, "beta": 0.0, "s_max": None}]
    mrs_b = [{"name": f"mrs_b{_g(b)}", "prior": None, "lam": 0.0, "beta": float(b), "s_max": None} for b in d["betas"]]
    combined = [{"name": f"both_l{_g(both['lam'])}_b{_g(both['beta'])}", "prior": "paper", "lam": float(both["lam"]),
                 "beta": float(both["beta"]), "s_max": None}]
    mps_one = [{"name": f"mps_l{_g(both['lam'])}", "prior": "paper", "lam": float(both["lam"]), "beta": 0.0,
                "s_max": None}]
    if kind == "main":
        mps = [{"name": f"mps_l{_g(lam)}", "prior": "paper", "lam": float(lam), "beta": 0.0, "s_max": None}
               for lam in d["lambdas"]]
        ctrl = [{"name": f"ctrl_l{_g(lam)}", "prior": "random", "lam": float(lam), "beta": 0.0, "s_max": None}
                for lam in d["lambdas"]]
        cal = [{"name": f"cal_l{_g(d['calibrated_lam'])}", "prior": "calibrated", "lam": float(d["calibrated_lam"]),
                "beta": 0.0, "s_max": None}]
        # grounding control (issue 17): vanilla decoding of each item from another scene's visual tokens
        shuffled = [{"name": SHUFFLED, "prior": None, "lam": 0.0, "beta": 0.0, "s_max": None, "shuffle": True}]
        out = base + mps + ctrl + cal + mrs_b[-1:] + combined + shuffled
    else:
        offspec = [{"name": f"offspec_s{_g(s)}", "prior": None, "lam": 0.0, "beta": 0.0, "s_max": float(s)}
                   for s in d["s_max"]]
        out = base + mrs_b + offspec + mps_one + combined
    seen: dict[str, dict[str, Any]] = {}
    for a in out:
        seen.setdefault(a["name"], a)
    return list(seen.values())


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {**cfg["data"], "seed": int(cfg["data_seed"])}


def train_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    return {**cfg["train"], "model": dict(cfg["model"]), "seed": int(seed)}


def evaluate_params(cfg: Mapping[str, Any], seed: int, condition: str) -> dict[str, Any]:
    d = cfg["decoding"]
    c = conditions(cfg)
    if condition not in c:
        raise ValueError(f"unknown decoding condition {condition!r} (have {sorted(c)})")
    return {"seed": int(seed), "condition": c[condition], "arms": arms(cfg, c[condition]["kind"]),
            "model": dict(cfg["model"]), "mrs": dict(cfg["mrs"]),
            **{k: d[k] for k in ("n_eval", "n_calib", "batch_size", "block_len", "attention", "k")}}


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What aggregate/figures/summary depend on: the grid and the claims' pre-declared thresholds."""
    return {"seeds": int(cfg["seeds"]), "conditions": conditions(cfg), "decoding": dict(cfg["decoding"]),
            "mrs": dict(cfg["mrs"]), "model": dict(cfg["model"]), "train_steps": int(cfg["train"]["steps"]),
            "eos_weight": float(cfg["train"]["eos_weight"]), "lr_floor": float(cfg["train"]["lr_floor"]),
            "data": dict(cfg["data"]), "claims": {k: dict(v) for k, v in cfg["claims"].items()}}


# ---------------------------------------------------------------------------------------- output paths
def data_path(data_dir: str) -> str:
    return f"{data_dir}/mpdpac/scenes.npz"


def model_path(models_dir: str, seed: int) -> str:
    return f"{models_dir}/mpdpac/s{seed}/model.safetensors"


def eval_path(results: str, seed: int, condition: str) -> str:
    return f"{results}/mpdpac/decode/s{seed}/{condition}.json"


def eval_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [eval_path(results, s, c) for s in seeds(cfg) for c in conditions(cfg)]


FIGURES = ("drift_by_step.png", "decoding_grid.png", "visual_attention.png", "attention_by_distance.png")
