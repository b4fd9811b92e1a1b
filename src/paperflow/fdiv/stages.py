"""f-divergence surrogate losses (f-TB) for VI and GFlowNets.

identity checks + one job per loss for the GMM fits (every model × seed: stage `gmm-loss`) and one per
loss for the hypergrid runs (every seed: `hypergrid-loss`) → aggregate (metrics.json, curves.csv) → figures → summary.md. Each stage is a plain function; the CLI
`paperflow fdiv <stage>` is generated from it (rules pass `--params JSON` from `paperflow.fdiv.plan`;
by hand: `--config FILE [--set k=v]` plus the job's coordinates `--model/--loss/--seed`).

No stage checkpoints: each run is a few hundred to a few thousand Adam steps on a 2-D or 8×8 problem
(seconds of CPU at the tiny scale), so a job runs all the runs of one loss, one after the other, each
written (with its manifest) to the same per-run file as the single-run stages `gmm` / `hypergrid`
write; a killed job reruns whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.fdiv import plan


class IdentityParams(TypedDict):
    """Spec §5 T1-T6 (built by `plan.identity_params`)."""

    losses: list[str]
    batch_size: int  # T3 batch size
    n_batches: int  # T3 batches averaged
    offpolicy_steps: int  # T5 Adam steps


class GmmParams(TypedDict, total=False):
    """One E1 job (built by `plan.gmm_params`); `flow` only for the RealNVP."""

    model: str
    loss: str
    seed: int
    lr: float
    behaviours: list[str]
    n_modes: int
    radius: float
    sigma: float
    weights: str
    log_z_offset: float
    grid: int
    extent: float
    proposal_std: float
    stale_lag: int
    steps: int
    batch_size: int
    lr_logz: float
    eval_every: int
    n_curve_samples: int
    n_eval_samples: int
    flow: dict[str, Any]


class HypergridParams(TypedDict):
    """One E2 job (built by `plan.hypergrid_params`)."""

    loss: str
    seed: int
    behaviours: list[str]
    height: int
    ndim: int
    r0: float
    r1: float
    r2: float
    hidden: int
    layers: int
    lr: float
    lr_logz: float
    eps: float
    batch_size: int
    steps: int
    eval_every: int


class GmmLossParams(TypedDict):
    """One `fdiv_gmm` job (built by `plan.gmm_loss_params`): the runs of one loss."""

    loss: str
    runs: list[GmmParams]


class HypergridLossParams(TypedDict):
    """One `fdiv_hypergrid` job (built by `plan.hypergrid_loss_params`): the runs of one loss."""

    loss: str
    runs: list[HypergridParams]


class ReportParams(TypedDict, total=False):
    """The run grid and target definitions the report stages depend on (`plan.report_params`);
    `claims` (the verdict thresholds) only for the summary (`plan.summary_params`)."""

    losses: list[str]
    seeds: int
    identity: dict[str, Any]
    gmm: dict[str, Any]
    hypergrid: dict[str, Any]
    claims: dict[str, dict[str, Any]]


@stage(plan=plan.identity_params)
def identity(params: IdentityParams, *, out: Path) -> dict[str, Any]:
    """float64 gradient-identity and batch-estimator checks of every registered loss."""
    from paperflow.core.io import Stage, write_json
    from paperflow.fdiv.identity import run_all

    with Stage("fdiv.identity", config=params, outputs=[out], seed=0) as st:
        res = run_all(params["losses"], params["n_batches"], params["batch_size"], params["offpolicy_steps"])
        write_json(out, res)
        st.metrics["all_pass"] = res["all_pass"]
        st.metrics["t1_max_rel_err"] = max(d["t1_max_rel_err"] for d in res["divergences"].values())
    return res


@stage(plan=plan.gmm_params)
def gmm(params: GmmParams, *, out: Path, density: Path) -> dict[str, Any]:
    """E1: fit the 2-D Gaussian mixture with one (model, loss, seed), every behaviour.

    `out`: the run's metrics (JSON); `density`: the final grid densities (.npz, one array per behaviour)."""
    import numpy as np

    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.fdiv import gmm as gmm_run

    with Stage("fdiv.gmm", config=params, outputs=[out, density], seed=params["seed"]) as st:
        res, dens = gmm_run.run(dict(params))
        write_json(out, res)
        with atomic_path(density) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **dens)
        for b, m in res["behaviours"].items():
            st.metrics[b] = {k: m[k] for k in ("coverage", "mode_weight_l1", "kl_pq", "kl_qp") if k in m}
    return res


@stage(plan=plan.hypergrid_params)
def hypergrid(params: HypergridParams, *, out: Path) -> dict[str, Any]:
    """E2: train the hypergrid GFlowNet with one (loss, seed), every behaviour."""
    from paperflow.core.io import Stage, write_json
    from paperflow.fdiv import hypergrid as hg

    with Stage("fdiv.hypergrid", config=params, outputs=[out], seed=params["seed"]) as st:
        res = hg.run(dict(params))
        write_json(out, res)
        for b, m in res["behaviours"].items():
            st.metrics[b] = {k: m[k] for k in ("l1", "modes_captured", "all_modes_captured_step")}
    return res


@stage("gmm-loss", plan=plan.gmm_loss_params)
def gmm_loss(params: GmmLossParams, *, results: Path = Path("results")) -> list[dict[str, Any]]:
    """E1 for one loss: every (model, seed) run in this process, each to `plan.gmm_path(results, ...)`
    (`results`: the results_dir) exactly as the single-run stage `gmm` writes it."""
    return [gmm(p, out=Path(plan.gmm_path(str(results), p["model"], p["loss"], p["seed"])),
                density=Path(plan.gmm_path(str(results), p["model"], p["loss"], p["seed"], "npz")))
            for p in params["runs"]]


@stage("hypergrid-loss", plan=plan.hypergrid_loss_params)
def hypergrid_loss(params: HypergridLossParams, *, results: Path = Path("results")) -> list[dict[str, Any]]:
    """E2 for one loss: every seed in this process, each to `plan.hypergrid_path(results, ...)`."""
    return [hypergrid(p, out=Path(plan.hypergrid_path(str(results), p["loss"], p["seed"]))) for p in params["runs"]]


@stage(plan=plan.report_params)
def aggregate(params: ReportParams, *, out: Path, curves: Path, results: Path = Path("results")) -> dict[str, Any]:
    """Collect every run into metrics.json (+ curves.csv).

    `results`: the results_dir the run files are in (their paths come from `plan`)."""
    from paperflow.fdiv import report

    return report.aggregate(dict(params), results, out, curves)


@stage(plan=plan.report_params)
def figures(params: ReportParams, *, outdir: Path, results: Path = Path("results")) -> list[Path]:
    """PNG figures from metrics.json, curves.csv and the density files."""
    from paperflow.fdiv import report

    return report.figures(dict(params), results, outdir)


@stage(plan=plan.summary_params)
def summary(params: ReportParams, *, out: Path, results: Path = Path("results")) -> None:
    """summary.md with the claims, measured numbers and verdicts (thresholds: `fdiv.claims.*`)."""
    from paperflow.fdiv import claims

    claims.summary(dict(params), results, out)
