"""Planning: the exact parameters each fdiv job depends on, derived from the validated config.

Rules and the generated CLI (`--config` plus the coordinates `--model --loss --seed`) both call these,
so a changed parameter reruns exactly its jobs. Output paths of the runs live here too (public).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(cfg["seeds"]))


def identity_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """T1-T6 checks: the losses and the batch/steps sizes of T3 and T5."""
    return {"losses": list(cfg["losses"]), **cfg["identity"]}


def gmm_runs(cfg: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    if not cfg["gmm"]["enabled"]:
        return []
    return [(m, loss, s) for m in cfg["gmm"]["models"] for loss in cfg["losses"] for s in seeds(cfg)]


def gmm_params(cfg: Mapping[str, Any], model: str, loss: str, seed: int) -> dict[str, Any]:
    """One E1 job: one (model, loss, seed), every behaviour of that model."""
    g = cfg["gmm"]
    keep = ("n_modes", "radius", "sigma", "weights", "log_z_offset", "grid", "extent", "proposal_std", "stale_lag",
            "steps", "batch_size", "lr_logz", "eval_every", "n_curve_samples", "n_eval_samples")
    p = {k: g[k] for k in keep}
    p.update(model=model, loss=loss, seed=int(seed), lr=g["lr"][model], behaviours=list(g["behaviours"][model]))
    if model == "flow":
        p["flow"] = dict(g["flow"])
    return p


def gmm_loss_params(cfg: Mapping[str, Any], loss: str) -> dict[str, Any]:
    """One `fdiv_gmm` job: every (model, seed) run of one loss, in one process (each run is seconds long;
    the job pays the torch start-up once)."""
    return {"loss": loss, "runs": [gmm_params(cfg, m, loss, s) for m, l, s in gmm_runs(cfg) if l == loss]}


def hypergrid_runs(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    if not cfg["hypergrid"]["enabled"]:
        return []
    return [(loss, s) for loss in cfg["losses"] for s in seeds(cfg)]


def hypergrid_params(cfg: Mapping[str, Any], loss: str, seed: int) -> dict[str, Any]:
    """One E2 job: one (loss, seed), every behaviour."""
    h = {k: v for k, v in cfg["hypergrid"].items() if k != "enabled"}
    return {**h, "behaviours": list(h["behaviours"]), "loss": loss, "seed": int(seed)}


def hypergrid_loss_params(cfg: Mapping[str, Any], loss: str) -> dict[str, Any]:
    """One `fdiv_hypergrid` job: every seed of one loss, in one process."""
    return {"loss": loss, "runs": [hypergrid_params(cfg, loss, s) for l, s in hypergrid_runs(cfg) if l == loss]}


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What aggregate/figures/summary depend on: the run grid and the target definitions."""
    return {"losses": list(cfg["losses"]), "seeds": cfg["seeds"], "identity": dict(cfg["identity"]),
            "gmm": {"enabled": cfg["gmm"]["enabled"], "models": list(cfg["gmm"]["models"]),
                    "behaviours": cfg["gmm"]["behaviours"], "n_modes": cfg["gmm"]["n_modes"],
                    "radius": cfg["gmm"]["radius"], "sigma": cfg["gmm"]["sigma"], "weights": cfg["gmm"]["weights"],
                    "grid": cfg["gmm"]["grid"], "extent": cfg["gmm"]["extent"], "steps": cfg["gmm"]["steps"]},
            "hypergrid": {k: cfg["hypergrid"][k] for k in ("enabled", "height", "ndim", "r0", "steps", "behaviours")}}


def summary_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The report parameters plus the claims' pre-declared thresholds (`fdiv.claims.*`)."""
    return {**report_params(cfg), "claims": {k: dict(v) for k, v in cfg["claims"].items()},
            "sample": {"gmm_eval_samples": cfg["gmm"]["n_eval_samples"], "gmm_batch": cfg["gmm"]["batch_size"],
                       "hypergrid_batch": cfg["hypergrid"]["batch_size"]}}


# ------------------------------------------------------------------------------------- output paths
def gmm_path(results: str, model: str, loss: str, seed: int, ext: str = "json") -> str:
    return f"{results}/fdiv/gmm/{model}/{loss}/seed{seed}.{ext}"


def hypergrid_path(results: str, loss: str, seed: int) -> str:
    return f"{results}/fdiv/hypergrid/{loss}/seed{seed}.json"


def figures(params: Mapping[str, Any]) -> list[str]:
    """Figure file names for the enabled experiments (report_params or the config section)."""
    names = []
    if params["gmm"]["enabled"]:
        names += ["gmm_densities_on.png", "gmm_densities_off.png"]
    names.append("coverage_vs_steps.png")
    if (params["gmm"]["enabled"] and "tabular" in params["gmm"]["models"]) or params["hypergrid"]["enabled"]:
        names.append("on_vs_off.png")
    if params["hypergrid"]["enabled"]:
        names.append("hypergrid_l1_vs_steps.png")
    return names


def run_files(results: str, cfg: Mapping[str, Any]) -> list[str]:
    """Every per-run output the aggregate stage reads (identity checks + GMM + hypergrid runs)."""
    files = [f"{results}/fdiv/unit/identity.json"]
    files += [gmm_path(results, m, l, s) for m, l, s in gmm_runs(cfg)]
    files += [hypergrid_path(results, l, s) for l, s in hypergrid_runs(cfg)]
    return files
