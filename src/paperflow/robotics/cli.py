"""`paperflow robotics <stage>`: sim -> extract -> lam-train -> lam-eval -> report (MVP-LAM part).

Rules pass `--params JSON`; by hand, pass `--config FILE` (plus `--model/--seed` where needed) and
the same planning functions in `paperflow.robotics.plan` derive the parameters.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paperflow.core.cli import Study, add_config_args, job_params

study = Study("robotics", "Bridge V2 multi-view extraction, tabletop simulator, MVP-LAM vs single-view LAM")
STUDIES = [study]


@study.stage("sim", "generate simulator episodes as a Bridge V2 raw tree (+ truth tree beside it)")
def _sim(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--out", required=True, help="raw tree root (the truth tree goes to <out>/../truth)")
    p.add_argument("--truth", required=True, help="truth tree root (must be <out>/../truth)")

    def run(a: argparse.Namespace) -> None:
        import shutil

        from paperflow.core.io import Stage
        from paperflow.robotics import plan
        from paperflow.robotics.simdata import generate

        prm = job_params(a, "robotics", plan.sim_params)
        out, truth = Path(a.out), Path(a.truth)
        if truth.resolve() != (out.parent / "truth").resolve():
            raise SystemExit(f"--truth must be {out.parent / 'truth'}")
        for d in (out, truth):
            shutil.rmtree(d, ignore_errors=True)
        tmp_root = out.parent / f".{out.name}.tmp"
        shutil.rmtree(tmp_root, ignore_errors=True)
        with Stage("robotics.sim", config=prm, outputs=[out, truth], seed=prm["seed"]) as st:
            # generate under a temp parent, then move raw/ and truth/ into place (atomic per tree)
            counts = generate(tmp_root / "raw", prm)
            (tmp_root / "truth").rename(truth)
            (tmp_root / "raw").rename(out)
            tmp_root.rmdir()
            st.metrics.update(counts)

    return run


@study.stage("extract", "Bridge V2 raw tree (real or simulated) -> multi-view Arrow dataset + stats + manifest")
def _extract(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--raw", required=True, help="raw tree root (<collection>/<env>/<task>/<NN>/<date>/raw/...)")
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage, atomic_path
        from paperflow.robotics import plan
        from paperflow.robotics.bridge import extract

        prm = job_params(a, "robotics", plan.extract_params)
        with Stage("robotics.extract", config=prm, outputs=[a.out], inputs=[]) as st:
            with atomic_path(a.out) as tmp:
                man = extract(a.raw, tmp, prm)
            st.metrics.update({"kept": man["kept"], "drop_reasons": man["drop_reasons"], "counts": man["counts"]})

    return run


@study.stage("lam-train", "train one LAM (mvp | single | single0) for one seed")
def _train(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--data", required=True, help="extracted dataset directory")
    p.add_argument("--out", required=True, help="model directory (model.safetensors, config.json, log.csv)")
    p.add_argument("--model", default="mvp")
    p.add_argument("--seed", type=int, required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage, atomic_path
        from paperflow.robotics import plan
        from paperflow.robotics.train import train_lam

        prm = job_params(a, "robotics", lambda c: plan.train_params(c, a.model))
        with Stage("robotics.lam_train", config=prm, outputs=[a.out], seed=a.seed) as st:
            with atomic_path(a.out) as tmp:
                st.metrics.update(train_lam(a.data, tmp, prm, a.seed))

    return run


@study.stage("lam-eval", "action-centricity of a trained LAM: KSG, mixed MI, BA bound, probes")
def _eval(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--data", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True, help="metrics.json")

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage, write_json
        from paperflow.core.seeding import seed_everything
        from paperflow.robotics import plan
        from paperflow.robotics.evaluate import evaluate_lam

        prm = job_params(a, "robotics", plan.eval_params)
        seed_everything(a.seed)
        with Stage("robotics.lam_eval", config=prm, outputs=[a.out], seed=a.seed) as st:
            m = evaluate_lam(a.model_dir, a.data, prm, a.seed)
            write_json(a.out, m)
            st.metrics.update({"ksg_slot0": m["slot0"]["ksg"], "probe_nmse_slot0": m["slot0"]["probe_nmse"]})

    return run


@study.stage("report", "aggregate LAM metrics; figures; summary.md with the MVP-LAM claim")
def _report(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--data", required=True, help="extracted dataset (for example frames)")
    p.add_argument("--metrics", nargs="+", required=True, help="per-run metrics.json files")
    p.add_argument("--outdir", required=True, help="results/robotics/mvplam")

    def run(a: argparse.Namespace) -> None:
        from paperflow.robotics import plan
        from paperflow.robotics.report import report

        prm = job_params(a, "robotics", plan.report_params)
        report(a.data, a.metrics, a.outdir, prm)

    return run
