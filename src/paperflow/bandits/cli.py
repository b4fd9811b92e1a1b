"""`paperflow bandits <stage>`: simulate → aggregate → figures → summary."""

from __future__ import annotations

import argparse
import json

from paperflow.core.cli import Study, add_config_args, study_config

study = Study("bandits", "BLCE / BLCE-G linear contextual bandits with O(log log T) updates")


@study.stage("simulate", "run one cell: (experiment, regime, algorithm, T, seed) for every β")
def _simulate(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--cell", help="exp/regime/variant/T/seed (with --config)")
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.bandits.plan import job_params
        from paperflow.bandits.stages import simulate

        if a.params:
            params = json.loads(a.params)
        else:
            if not a.cell:
                raise SystemExit("--cell exp/regime/variant/T/seed is required with --config")
            exp, regime, variant, T, seed = a.cell.split("/")
            params = job_params(study_config(a, "bandits"), exp, regime, variant, int(T), int(seed))
        simulate(params, a.out)

    return run


@study.stage("aggregate", "collect simulation cells into metrics.json")
def _aggregate(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True)
    p.add_argument("inputs", nargs="+")

    def run(a: argparse.Namespace) -> None:
        from paperflow.bandits.stages import aggregate

        aggregate(a.inputs, a.out)

    return run


@study.stage("figures", "draw the study's figures from metrics.json")
def _figures(p: argparse.ArgumentParser):
    p.add_argument("--metrics", required=True)
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.bandits.figures import make_all
        from paperflow.core.io import Stage, read_json

        outs = [f"{a.outdir}/{n}" for n in __import__("paperflow.bandits.figures", fromlist=["FIGURES"]).FIGURES]
        with Stage("bandits.figures", config={}, outputs=outs, inputs=[a.metrics]):
            make_all(read_json(a.metrics), a.outdir)

    return run


@study.stage("summary", "write summary.md: claims, measured numbers, held or not")
def _summary(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--metrics", required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.bandits.report import write
        from paperflow.core.io import read_json

        cfg = json.loads(a.params) if a.params else study_config(a, "bandits")
        write(read_json(a.metrics), cfg, a.out, [a.metrics])

    return run


STUDIES = [study]
