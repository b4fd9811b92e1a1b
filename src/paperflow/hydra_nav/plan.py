"""Planning: which jobs the `hydra_nav:` config asks for and exactly which parameters each depends on.
Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.hydra_nav.evaluate import baseline_triggers

SPLITS = ("train", "test")


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"]))) if cfg["policies"]["irft"] else []


def baseline_groups(cfg: Mapping[str, Any]) -> list[list[str]]:
    """The fixed policies (a)–(d), `jobs.policies_per_job` per job, in a fixed order."""
    names = list(baseline_triggers(cfg))
    k = int(cfg["jobs"]["policies_per_job"])
    return [names[i:i + k] for i in range(0, len(names), k)]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"houses": dict(cfg["houses"]), "train": int(cfg["episodes"]["train"]),
            "test": int(cfg["episodes"]["test"]), "seed": int(cfg["episodes"]["seed"])}


def _common(cfg: Mapping[str, Any]) -> dict[str, Any]:
    c = cfg["controllers"]
    return {"view_radius": int(cfg["env"]["view_radius"]), "max_steps": int(cfg["env"]["max_steps"]),
            "lam": float(c["lam"]), "stagnation_m": int(c["stagnation_m"]), "move_cost": float(c["move_cost"]),
            "decision_cost": float(c["decision_cost"])}


def irft_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One learned-trigger seed: training rounds for every cost, then its evaluation on the test houses."""
    return {**_common(cfg), **dict(cfg["irft"]), "costs": [float(x) for x in cfg["controllers"]["costs"]],
            "seed": int(seed)}


def baselines_params(cfg: Mapping[str, Any], group: int) -> dict[str, Any]:
    groups = baseline_groups(cfg)
    if not 0 <= group < len(groups):
        raise ValueError(f"hydra_nav: no baseline group {group} (there are {len(groups)})")
    trig = baseline_triggers(cfg)
    return {**_common(cfg), "group": int(group), "policies": {p: trig[p] for p in groups[group]},
            "seed": int(cfg["episodes"]["seed"])}
