"""BLCE / BLCE-G linear contextual bandits with O(log log T) updates.

The reference study of the stage contract (docs/adding-a-study.md): each stage is a plain function with
explicit paths and a typed parameters object; `paperflow bandits <stage>` is generated from it by
`paperflow.core.cli`. simulate-chunk (the cells of one chunk, `plan.chunks`; or simulate, one cell) →
aggregate → figures → summary.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from paperflow.bandits import plan
from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.core.stats import mean_se

log = logging.getLogger(__name__)


class SimulateParams(TypedDict):
    """What one simulation cell depends on (built by `plan.job_params`)."""

    exp: str
    regime: str
    variant: str
    algo: str
    K: int
    d: int
    T: int
    seed: int
    env: dict[str, Any]
    algo_params: dict[str, Any]
    betas: list[float]
    beta_mode: str
    c_beta: float


class ChunkParams(TypedDict):
    """What one chunk job depends on (built by `plan.chunk_params`): its cells, in (T, seed) order."""

    cells: list[SimulateParams]


def _run_cell(params: SimulateParams) -> dict[str, Any]:
    """One cell (experiment, regime, algorithm, T, seed), every β in params['betas']: {"params", "runs"}."""
    from paperflow.bandits.simulate import run_one

    runs = []
    for beta in params["betas"]:
        algo_params = dict(params["algo_params"], beta=beta, beta_mode=params["beta_mode"], c_beta=params["c_beta"])
        res = run_one({"K": params["K"], "d": params["d"]}, params["algo"], algo_params, params["T"], params["seed"],
                      dict(params["env"]))
        log.info("%s %s T=%d seed=%d beta=%g: regret=%.1f updates=%d runtime=%.2fs", params["variant"],
                 params["regime"], params["T"], params["seed"], beta, res.final_regret, res.n_updates, res.runtime_s)
        runs.append({"beta": beta, **res.to_json()})
    return {"params": dict(params), "runs": runs}


def _cell_metrics(cell: dict[str, Any]) -> dict[str, Any]:
    return {f"beta={r['beta']:g}": {"final_regret": r["final_regret"], "n_updates": r["n_updates"],
                                    "runtime_s": r["runtime_s"]} for r in cell["runs"]}


@stage(plan=plan.job_params)
def simulate(params: SimulateParams, *, out: Path) -> dict[str, Any]:
    """Run one cell (experiment, regime, algorithm, T, seed) for every β in params['betas'] (the job of
    `rounds_per_job: 1`; by hand: `--exp --regime --variant --T --seed`)."""
    with Stage("bandits.simulate", config=params, outputs=[out], seed=params["seed"]) as st:
        result = _run_cell(params)
        write_json(out, result)
        st.metrics = _cell_metrics(result)
    return result


@stage("simulate-chunk", plan=plan.chunk_params)
def simulate_chunk(params: ChunkParams, *, out: Path) -> dict[str, Any]:
    """Run the cells of one chunk (`plan.chunks`: part of one experiment × regime × algorithm) one after
    the other in this process: {"cells": [{"params", "runs"}, ...]}, each cell exactly what `simulate` writes.
    A killed job reruns its whole chunk (at most `rounds_per_job` rounds)."""
    cells = params["cells"]
    with Stage("bandits.simulate-chunk", config=params, outputs=[out], seed=cells[0]["seed"] if cells else None) as st:
        result = {"cells": [_run_cell(c) for c in cells]}
        write_json(out, result)
        st.metrics = {f"T{c['params']['T']}_s{c['params']['seed']}": _cell_metrics(c) for c in result["cells"]}
    return result


def _mean_se(x: Sequence[float]) -> tuple[float, float]:
    m, se = mean_se(x)
    return m, (0.0 if se is None else se)


@stage()
def aggregate(inputs: list[Path], *, out: Path) -> dict[str, Any]:
    """Collect every cell into one metrics file: per (exp, regime, variant, T, β) seed statistics.
    `inputs`: per-cell files (`simulate`) and/or chunk files (`simulate-chunk`)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    docs = [read_json(f) for f in inputs]
    cells = [c for doc in docs for c in (doc["cells"] if "cells" in doc else [doc])]
    for cell in cells:
        p = cell["params"]
        for r in cell["runs"]:
            groups[(p["exp"], p["regime"], p["variant"], p["algo"], p["K"], p["d"], p["T"], r["beta"])].append(
                {**r, "seed": p["seed"]})
    rows = []
    for (exp, regime, variant, algo, K, d, T, beta), runs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        runs.sort(key=lambda r: r["seed"])
        fr_m, fr_se = _mean_se([r["final_regret"] for r in runs])
        rt_m, rt_se = _mean_se([r["runtime_s"] / T for r in runs])
        rows.append({
            "exp": exp, "regime": regime, "variant": variant, "algo": algo, "K": K, "d": d, "T": T, "beta": beta,
            "seeds": [r["seed"] for r in runs],
            "final_regret": [r["final_regret"] for r in runs], "final_regret_mean": fr_m, "final_regret_se": fr_se,
            "n_updates": [r["n_updates"] for r in runs],
            "runtime_per_round_s": [r["runtime_s"] / T for r in runs],
            "runtime_per_round_s_mean": rt_m, "runtime_per_round_s_se": rt_se,
            "ctx_time_s_mean": float(np.mean([r["ctx_time_s"] for r in runs])),
            "flops_per_round": float(np.mean([r["flops_per_round"] for r in runs])),
            "regret_t": runs[0]["regret_t"], "regret_curves": [r["regret_curve"] for r in runs],
            "stats": {k: float(np.mean([r["stats"].get(k, 0.0) for r in runs]))
                      for k in runs[0]["stats"] if k != "grid"},
            "stats_per_seed": {k: [float(r["stats"].get(k, 0.0)) for r in runs]
                               for k in runs[0]["stats"] if k != "grid"},
            "grid": runs[0]["stats"].get("grid"),
        })
    metrics = {"rows": rows, "n_cells": len(cells), "n_files": len(inputs)}
    with Stage("bandits.aggregate", config={"n_inputs": len(inputs)}, outputs=[out], inputs=inputs) as st:
        write_json(out, metrics)
        st.metrics = {"n_rows": len(rows), "n_cells": len(inputs)}
    return metrics


@stage()
def figures(*, metrics: Path, outdir: Path) -> list[Path]:
    """Draw the study's figures from metrics.json."""
    from paperflow.bandits.figures import FIGURES, make_all

    outs = [Path(outdir) / n for n in FIGURES]
    with Stage("bandits.figures", config={}, outputs=outs, inputs=[metrics]):
        return make_all(read_json(metrics), outdir)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers, verdicts (params: the study's config section)."""
    from paperflow.bandits.report import write

    write(read_json(metrics), params, out, [str(metrics)])
