"""Planning: which jobs the `video_bci:` config asks for and exactly which parameters each depends on.
Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.core.resources import per_job


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def chunks(cfg: Mapping[str, Any]) -> list[list[str]]:
    """The configured arms, in order, in groups of `arms_per_job` (one torch start-up per group and seed)."""
    return per_job(cfg["arms"], cfg["arms_per_job"])


def arm_jobs(cfg: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(seed, chunk index) of every arms job."""
    return [(s, c) for s in seeds(cfg) for c in range(len(chunks(cfg)))]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["data"])


def arms_params(cfg: Mapping[str, Any], seed: int, chunk: int) -> dict[str, Any]:
    """Everything one arms job (one seed, one group of arms) depends on."""
    p = {"seed": int(seed), "chunk": int(chunk), "arms": chunks(cfg)[int(chunk)], **dict(cfg["model"]),
         **dict(cfg["rl"])}
    if cfg["data"]["prior_source"] == "self":  # only then: fixed-prior jobs keep their parameters (and hashes)
        p["prior_source"] = "self"
    return p
