"""Planning: which jobs the `staged_rl:` config asks for and exactly which parameters each depends on.
Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.core.resources import per_job


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def arms_of_seed(cfg: Mapping[str, Any], seed: int) -> list[str]:
    """The configured arms that run on `seed`: full_seed_arms on every seed, the others on the first
    other_arm_seeds seeds (the config's arm order)."""
    full = set(cfg["full_seed_arms"])
    return [a for a in cfg["arms"] if a in full or int(seed) < int(cfg["other_arm_seeds"])]


def chunks(cfg: Mapping[str, Any], seed: int) -> list[list[str]]:
    return per_job(arms_of_seed(cfg, seed), cfg["arms_per_job"])


def arm_jobs(cfg: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(seed, chunk index) of every arms job."""
    return [(s, c) for s in seeds(cfg) for c in range(len(chunks(cfg, s)))]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["data"])


def _shared(cfg: Mapping[str, Any]) -> dict[str, Any]:
    d, rl = cfg["data"], cfg["rl"]
    return {"n_slots": int(d["n_slots"]), "sigma_img": float(d["sigma_img"]), **dict(cfg["model"]),
            "max_new": int(rl["max_new"]), "max_looks": int(rl["max_looks"]), "eval_seed": int(rl["eval_seed"])}


def base_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Everything the warm-up, the filter and the base evaluation of one seed depend on."""
    w = cfg["warmup"]
    return {"seed": int(seed), **_shared(cfg), "warmup_steps": int(w["steps"]), "warmup_batch": int(w["batch"]),
            "warmup_lr": float(w["lr"]), "warmup_look_rate": float(w["look_rate"]), "ckpt_every": int(w["ckpt_every"])}


def arms_params(cfg: Mapping[str, Any], seed: int, chunk: int) -> dict[str, Any]:
    """Everything one arms job (one seed, one group of arms) depends on."""
    rl = dict(cfg["rl"])
    return {"seed": int(seed), "chunk": int(chunk), "arms": chunks(cfg, seed)[int(chunk)], **_shared(cfg),
            **{k: v for k, v in rl.items() if k not in ("max_new", "max_looks", "eval_seed")},
            "trl": dict(cfg["trl"])}
