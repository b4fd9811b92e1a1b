"""`paperflow fdiv <stage>`: identity checks, GMM and hypergrid runs, aggregate, figures, summary.

Rules pass `--params JSON` (built by paperflow.fdiv.plan); by hand use `--config FILE [--set k=v]`
plus the job's wildcards (`--model/--loss/--seed`), which derive the same parameters.
"""

from __future__ import annotations

import argparse
import json

from paperflow.core.cli import Study, add_config_args, job_params, study_config

study = Study("fdiv", "f-divergence surrogate losses (f-TB) for VI and GFlowNets")
STUDIES = [study]


@study.stage("identity", "float64 gradient-identity and batch-estimator checks of every registered loss")
def _identity(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import torch

        from paperflow.core.io import Stage, write_json
        from paperflow.fdiv import plan
        from paperflow.fdiv.identity import run_all

        torch.set_num_threads(1)
        params = job_params(a, "fdiv", plan.identity_params)
        with Stage("fdiv.identity", config=params, outputs=[a.out], seed=0) as st:
            res = run_all(params["losses"], params["n_batches"], params["batch_size"], params["offpolicy_steps"])
            write_json(a.out, res)
            st.metrics["all_pass"] = res["all_pass"]
            st.metrics["t1_max_rel_err"] = max(d["t1_max_rel_err"] for d in res["divergences"].values())

    return run


@study.stage("gmm", "E1: fit the 2-D Gaussian mixture with one (model, loss, seed), every behaviour")
def _gmm(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--model")
    p.add_argument("--loss")
    p.add_argument("--seed", type=int)
    p.add_argument("--out", required=True, help="metrics JSON")
    p.add_argument("--density", required=True, help="final grid densities (.npz, one array per behaviour)")

    def run(a: argparse.Namespace) -> None:
        import numpy as np
        import torch

        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.fdiv import gmm, plan

        torch.set_num_threads(1)
        params = (json.loads(a.params) if a.params
                  else plan.gmm_params(study_config(a, "fdiv"), a.model, a.loss, a.seed))
        with Stage("fdiv.gmm", config=params, outputs=[a.out, a.density], seed=params["seed"]) as st:
            res, dens = gmm.run(params)
            write_json(a.out, res)
            with atomic_path(a.density) as tmp:
                with open(tmp, "wb") as fh:
                    np.savez_compressed(fh, **dens)
            for b, m in res["behaviours"].items():
                st.metrics[b] = {k: m[k] for k in ("coverage", "mode_weight_l1", "kl_pq", "kl_qp") if k in m}

    return run


@study.stage("hypergrid", "E2: train the hypergrid GFlowNet with one (loss, seed), every behaviour")
def _hypergrid(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--loss")
    p.add_argument("--seed", type=int)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import torch

        from paperflow.core.io import Stage, write_json
        from paperflow.fdiv import hypergrid, plan

        torch.set_num_threads(1)
        params = (json.loads(a.params) if a.params
                  else plan.hypergrid_params(study_config(a, "fdiv"), a.loss, a.seed))
        with Stage("fdiv.hypergrid", config=params, outputs=[a.out], seed=params["seed"]) as st:
            res = hypergrid.run(params)
            write_json(a.out, res)
            for b, m in res["behaviours"].items():
                st.metrics[b] = {k: m[k] for k in ("l1", "modes_captured", "all_modes_captured_step")}

    return run


def _report_args(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--results", default="results", help="results_dir (run files are found from the params)")


@study.stage("aggregate", "collect every run into metrics.json (+ curves.csv)")
def _aggregate(p: argparse.ArgumentParser):
    _report_args(p)
    p.add_argument("--out", required=True)
    p.add_argument("--curves", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.fdiv import plan, report

        params = job_params(a, "fdiv", plan.report_params)
        report.aggregate(params, a.results, a.out, a.curves)

    return run


@study.stage("figures", "PNG figures from metrics.json, curves.csv and the density files")
def _figures(p: argparse.ArgumentParser):
    _report_args(p)
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.fdiv import plan, report

        params = job_params(a, "fdiv", plan.report_params)
        report.figures(params, a.results, a.outdir)

    return run


@study.stage("summary", "summary.md with the claims and measured verdicts")
def _summary(p: argparse.ArgumentParser):
    _report_args(p)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.fdiv import plan, report

        params = job_params(a, "fdiv", plan.report_params)
        report.summary(params, a.results, a.out)

    return run
