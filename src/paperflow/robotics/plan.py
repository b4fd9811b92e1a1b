"""Planning: the validated `robotics:` config section -> each job's parameters and paths.

Rules and the CLI call the same functions, so a job reruns exactly when its parameters change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def sim_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["sim"])


def extract_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    e = dict(cfg["extract"])
    e.pop("raw_root", None)  # a path, not a parameter: it is the rule's input
    return e


def train_params(cfg: Mapping[str, Any], model: str) -> dict[str, Any]:
    lam = dict(cfg["lam"])
    net = dict(lam.pop("net"))
    lam.pop("models")
    net["image_size"] = cfg["extract"]["image_size"]
    return {**lam, "lam": net, "model": model}


def eval_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["eval"])


def check_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The action-visibility check: its own settings, the LAMs' frame gap / test stride / stem."""
    net = cfg["lam"]["net"]
    return {**dict(cfg["action_check"]), "frame_gap": cfg["lam"]["frame_gap"],
            "eval_stride": cfg["eval"]["eval_stride"], "action_dims": list(cfg["eval"]["action_dims"]),
            "stem": {"feat_channels": net["feat_channels"], "grid": net["grid"], "stem_seed": net["stem_seed"]}}


def models(cfg: Mapping[str, Any]) -> list[str]:
    return list(cfg["lam"]["models"])


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(cfg["seeds"])


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"models": models(cfg), "seeds": seeds(cfg), "eval": eval_params(cfg),
            "frame_gap": cfg["lam"]["frame_gap"], "steps": cfg["lam"]["steps"],
            "real_data": cfg["extract"]["raw_root"] is not None, "claims": dict(cfg["claims"]),
            "action_check": dict(cfg["action_check"])}
