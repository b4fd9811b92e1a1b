"""Planning: the validated `robopolicy:` config section -> each job's parameters and paths.

Rules and the CLI call the same functions, so a job reruns exactly when its parameters change.
Outputs: `results/robotics/lara/`, `results/robotics/gam/`; the combined summary registered for the
study key `robopolicy` is `results/robotics/robopolicy_summary.md`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def lara_on(cfg: Mapping[str, Any]) -> bool:
    return bool(cfg["lara"]["enabled"])


def gam_on(cfg: Mapping[str, Any]) -> bool:
    return bool(cfg["gam"]["enabled"])


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(cfg["seeds"])


def variants(cfg: Mapping[str, Any]) -> list[str]:
    return list(cfg["lara"]["variants"])


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Simulator episodes (robotics `simdata.generate` params) + extractor params."""
    la = cfg["lara"]
    return {"sim": dict(la["sim"]), "extract": dict(la["extract"])}


def _train_common(cfg: Mapping[str, Any]) -> dict[str, Any]:
    la = cfg["lara"]
    keys = ("horizon", "batch_size", "lr", "weight_decay", "warmup", "log_every", "ckpt_every", "net", "s1_steps")
    return {k: la[k] for k in keys} | {"image_size": la["extract"]["image_size"]}


def lam_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return _train_common(cfg)


def train_params(cfg: Mapping[str, Any], variant: str) -> dict[str, Any]:
    la = cfg["lara"]
    return _train_common(cfg) | {"variant": variant, "tasks_a": list(la["tasks_a"]), "tasks_b": list(la["tasks_b"]),
                                 "s2_steps": la["s2_steps"], "s3_steps": la["s3_steps"], "s3_demos": la["s3_demos"],
                                 "w_align": la["w_align"], "w_lam": la["w_lam"]}


def eval_templates(cfg: Mapping[str, Any]) -> list[str]:
    la = cfg["lara"]
    return list(la["tasks_b"]) if la["s3_steps"] > 0 else list(la["tasks_a"])


def eval_params(cfg: Mapping[str, Any], variant: str) -> dict[str, Any]:
    la = cfg["lara"]
    return train_params(cfg, variant) | {"eval": dict(la["eval"]), "euler_steps": la["euler_steps"],
                                         "templates": eval_templates(cfg), "render": dict(la["sim"]["render"]),
                                         "resize_mode": la["extract"]["resize_mode"]}


def jobs_per_seed(cfg: Mapping[str, Any]) -> bool:
    """`lara.jobs: seed`: one `lara_seed` job per seed trains and evaluates all its variants."""
    return cfg["lara"]["jobs"] == "seed"


def seed_group(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters of one `lara-seed` job: per variant, exactly the `train` and `evaluate` jobs' parameters."""
    return {"variants": {v: {"train": train_params(cfg, v), "eval": eval_params(cfg, v)} for v in variants(cfg)}}


def model_dir(models: str, variant: str, seed: int | str) -> str:
    return f"{models}/{variant}/seed{seed}"


def lara_eval_dir(results: str, variant: str, seed: int | str) -> str:
    return f"{results}/robotics/lara/{variant}/seed{seed}"


def lara_report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    la = cfg["lara"]
    return {"variants": variants(cfg), "seeds": seeds(cfg), "eval": dict(la["eval"]), "templates": eval_templates(cfg),
            "render": dict(la["sim"]["render"]), "s1_steps": la["s1_steps"], "s2_steps": la["s2_steps"],
            "s3_steps": la["s3_steps"], "w_align": la["w_align"], "w_lam": la["w_lam"], "horizon": la["horizon"],
            "claims": dict(cfg["claims"]["lara"])}


# Snakemake `priority:` per rule (higher starts first among ready jobs; scheduling only, no output changes):
# the LARA chain data -> S1 -> per-seed training is the longest, so it starts first and the short robotics and
# GAM jobs fill the other core (list-scheduling the 7 Dec run's job times: mean makespan 453 s with these
# priorities against 486 s without, over random tie orders; bench/schedule_sim.py).
PRIORITY = {"data": 10, "lam_pretrain": 9, "lara_seed": 8, "train": 8, "evaluate": 7}


def job_priority(stage: str) -> int:
    return PRIORITY.get(stage, 0)


GAM_WORLD_ONLY = {"tabletop": ("expert_noise", "L0", "bc_input", "bc_hidden"), "pose": ("demo_noise", "demo_steps")}


def gam_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """gam-run's parameters: the GAM section without `enabled`/`seeds` and without the other world's keys."""
    g = dict(cfg["gam"])
    g.pop("enabled")
    g.pop("seeds")
    world = g.get("world", "tabletop")
    for other, keys in GAM_WORLD_ONLY.items():
        if other != world:
            for k in keys:
                g.pop(k, None)
    return g


def gam_tabletop(cfg: Mapping[str, Any]) -> bool:
    return gam_on(cfg) and cfg["gam"].get("world", "tabletop") == "tabletop"


# the extractor's settings for the course demos: the fixed camera only, small frames (GAM reads the states)
GAM_EXTRACT = {"image_size": 16, "resize_mode": "squash", "require_views": [0], "keep_single_view": False,
               "drop_first_step": False, "min_frames": 2, "depth": 5, "extra_depths": [], "split_cuts": [0.8, 0.9]}


def gam_data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """gam-data: the demo-recording parameters of gam-run, every seed, and the extractor's settings."""
    return gam_params(cfg) | {"seeds": gam_seeds(cfg), "extract": dict(GAM_EXTRACT)}


def gam_data_dir(data_dir: str) -> str:
    return f"{data_dir}/gam_mv"


def gam_run_inputs(cfg: Mapping[str, Any], data_dir: str) -> dict[str, str]:
    """gam-run reads the extracted demos in the tabletop world; the pose world draws its own."""
    return {"data": gam_data_dir(data_dir)} if gam_tabletop(cfg) else {}


def gam_report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """gam-run's parameters + the GAM claims' decision rules (`robopolicy.claims.gam`) + the seed count."""
    return gam_params(cfg) | {"seeds": int(cfg["gam"]["seeds"]), "claims": dict(cfg["claims"]["gam"])}


def gam_seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["gam"]["seeds"])))


def lara_eval_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{lara_eval_dir(results, v, s)}/metrics.json" for v in variants(cfg) for s in seeds(cfg)]


def gam_seed_paths(cfg: Mapping[str, Any], results: str) -> list[str]:
    return [f"{results}/robotics/gam/seeds/seed{s}.json" for s in gam_seeds(cfg)]


def summaries(cfg: Mapping[str, Any], results: str) -> list[str]:
    out = []
    if lara_on(cfg):
        out.append(f"{results}/robotics/lara/summary.md")
    if gam_on(cfg):
        out.append(f"{results}/robotics/gam/summary.md")
    return out


def targets(cfg: Mapping[str, Any], results: str) -> list[str]:
    out = [f"{results}/robotics/robopolicy_summary.md"]
    if lara_on(cfg):
        out += [f"{results}/robotics/lara/{f}" for f in ("metrics.json", "summary.md", "success.png", "rollouts.png")]
    if gam_on(cfg):
        out += [f"{results}/robotics/gam/{f}" for f in ("metrics.json", "summary.md", "success.png", "rollouts.png")]
    return out
