"""Planning: which jobs the `hyper_icl:` config asks for and exactly which parameters each depends on.
Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.core.resources import per_job

BACKENDS = ("tiny", "hf_lm", "vlm")


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def chunks(cfg: Mapping[str, Any]) -> list[list[str]]:
    """The configured arms, in order, split into groups of `arms_per_job` (one job per group × target × seed:
    every job pays the interpreter + torch start-up once for all its arms)."""
    return per_job(cfg["arms"], cfg["arms_per_job"])


def arm_jobs(cfg: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(seed, chunk index) of every arms job; a job runs its arms on every target task (one start-up)."""
    return [(s, c) for s in seeds(cfg) for c in range(len(chunks(cfg)))]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["data"])


def base_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Everything the base model of one seed depends on."""
    return {"seed": int(seed), "backend": cfg["backend"], **dict(cfg["model"]), **dict(cfg["base"]), **_hf(cfg)}


def arms_params(cfg: Mapping[str, Any], seed: int, chunk: int) -> dict[str, Any]:
    """Everything one arms job (one seed, one group of arms, every target task) depends on."""
    return {"targets": list(cfg["targets"]), "seed": int(seed), "chunk": int(chunk), "arms": chunks(cfg)[int(chunk)],
            "backend": cfg["backend"], "warm_colours": list(cfg["data"]["warm_colours"]), **dict(cfg["model"]),
            **dict(cfg["adapter"]), "max_param_ratio": float(cfg["report"]["max_param_ratio"]), **_hf(cfg)}


def _hf(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The `hf_lm` settings, only in the hf_lm backend's jobs (the tiny jobs do not depend on them)."""
    return {"hf_lm": dict(cfg["hf_lm"])} if cfg["backend"] == "hf_lm" else {}
