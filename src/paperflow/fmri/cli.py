"""`paperflow fmri <stage>`: geometry -> synth -> prep -> pretrain -> embed -> evaluate -> scaling -> report.
Heavy imports (torch, nilearn, datasets) happen inside the run functions."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from paperflow.core.cli import Study, add_config_args, job_params, path_arg

log = logging.getLogger("paperflow.fmri")
study = Study("fmri", "flat-map fMRI: projection operator, synthetic BOLD, CortexMAE pretraining, Brainmarks probes")
STUDIES = [study]


def _threads() -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


@study.stage("geometry", "build the flat / parcel / volume projectors (sparse operators) once")
def _geometry(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--out", type=path_arg, required=True, help="output directory")

    def run(a):
        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.fmri import plan
        from paperflow.fmri.data import build_geometry

        prm = job_params(a, "fmri", plan.geometry_params)
        with Stage("fmri.geometry", prm, outputs=[a.out]) as st:
            with atomic_path(a.out) as tmp:
                summ = build_geometry(prm, tmp)
                write_json(tmp / "geometry.json", summ)
            st.metrics.update({f"{k}_{m}": v[m] for k, v in summ.items() for m in ("D", "n_patches", "n_nonempty_patches")})
    return run


@study.stage("synth", "write one synthetic cohort as NIfTI runs (MNI 4 mm) + events + truth")
def _synth(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--cohort", required=True, choices=["pretrain", "state", "trait"])
    p.add_argument("--geometry", type=path_arg, required=True, help="geometry directory (grid.npz)")
    p.add_argument("--out", type=path_arg, required=True)

    def run(a):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.core.progress import progress
        from paperflow.fmri import plan
        from paperflow.fmri.data import synth_cohort

        prm = job_params(a, "fmri", lambda c: plan.synth_params(c, a.cohort))
        with Stage("fmri.synth", prm, outputs=[a.out], inputs=[a.geometry / "grid.npz"], seed=prm["seed"]) as st:
            with atomic_path(a.out) as tmp:
                parts = synth_cohort(prm, a.geometry, tmp, progress)
            st.metrics["subjects"] = len(parts)
            st.metrics["trait_group_balance"] = sum(q["trait_group"] for q in parts) / len(parts)
    return run


@study.stage("prep", "project a cohort into flat / parcel / volume, z-score, resample to 1 s, float16 Arrow")
def _prep(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--cohort", required=True, choices=["pretrain", "state", "trait"])
    p.add_argument("--synth", type=path_arg, required=True)
    p.add_argument("--geometry", type=path_arg, required=True)
    p.add_argument("--out", type=path_arg, required=True)

    def run(a):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.core.progress import progress
        from paperflow.fmri import plan
        from paperflow.fmri.data import load_projectors, prep_cohort

        prm = job_params(a, "fmri", lambda c: plan.prep_params(c, a.cohort))
        with Stage("fmri.prep", prm, outputs=[a.out], inputs=[a.geometry]) as st:
            with atomic_path(a.out) as tmp:
                st.metrics.update(prep_cohort(prm, a.synth, load_projectors(a.geometry), tmp, progress))
    return run


@study.stage("pretrain", "train the MAE on pretrain-cohort clips of one space (resumable)")
def _pretrain(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--tag", required=True, help="run tag, e.g. flat-s0 or flat-n4-d0-s0")
    p.add_argument("--geometry", type=path_arg, required=True)
    p.add_argument("--data", type=path_arg, required=True, help="prep/pretrain directory")
    p.add_argument("--out", type=path_arg, required=True, help="run directory (best.pt, last.pt, log.jsonl)")

    def run(a):
        import numpy as np

        from paperflow.core.io import Stage, write_json
        from paperflow.core.progress import progress
        from paperflow.fmri import plan
        from paperflow.fmri.data import load_runs
        from paperflow.fmri.geometry import Projector
        from paperflow.fmri.prep import load_splits
        from paperflow.fmri.train import pretrain

        _threads()
        prm = job_params(a, "fmri", lambda c: plan.train_params(c, a.tag))
        proj = Projector.load(a.geometry / f"{prm['space']}.npz")
        subs = sorted(set(load_splits(a.data / prm["space"])["train"]["subject"]))
        rng = np.random.default_rng([prm["seed"], prm["n_subjects"], 5])
        perm = rng.permutation(subs)
        d = prm["draw"]
        chosen = sorted(perm[d * prm["n_subjects"]:(d + 1) * prm["n_subjects"]]) if (d + 1) * prm["n_subjects"] <= len(subs) \
            else sorted(perm[:prm["n_subjects"]])
        train_runs, _ = load_runs(a.data, prm["space"], "train", list(chosen))
        val_runs, _ = load_runs(a.data, prm["space"], "validation")
        result = a.out / "result.json"
        with Stage("fmri.pretrain", prm, outputs=[result], inputs=[a.geometry], seed=prm["seed"]) as st:
            res = pretrain(proj, train_runs, val_runs, prm, a.out, progress)
            frames = int(sum(r.shape[0] for r in train_runs))
            out = {"tag": a.tag, "space": prm["space"], "subjects": chosen, "n_subjects": len(chosen), "frames": frames,
                   **res}
            write_json(result, out)
            st.metrics.update({k: out[k] for k in ("best_val_loss", "initial_loss", "frames", "n_subjects")})
    return run


@study.stage("embed", "frozen-encoder features of the state clips and trait runs")
def _embed(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--tag", required=True, help="flat-s0 (pretrained) or flat-rand (random init)")
    p.add_argument("--geometry", type=path_arg, required=True)
    p.add_argument("--ckpt", type=path_arg, default=None)
    p.add_argument("--state", type=path_arg, required=True)
    p.add_argument("--trait", type=path_arg, required=True)
    p.add_argument("--out", type=path_arg, required=True)

    def run(a):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.fmri import plan
        from paperflow.fmri.geometry import Projector
        from paperflow.fmri.train import embed_features, load_model

        _threads()
        prm = job_params(a, "fmri", lambda c: plan.embed_params(c, a.tag))
        proj = Projector.load(a.geometry / f"{prm['space']}.npz")
        model = load_model(proj, None if prm["random_init"] else a.ckpt, prm)
        ins = [a.geometry] + ([a.ckpt] if a.ckpt and not prm["random_init"] else [])
        with Stage("fmri.embed", prm, outputs=[a.out], inputs=ins, seed=prm["seed"]) as st:
            with atomic_path(a.out) as tmp:
                st.metrics.update(embed_features(model, proj, a.state, a.trait, prm, tmp))
    return run


@study.stage("evaluate", "probes: state decoding, traits, FC baseline, raw, oracle, chance, repeated splits")
def _evaluate(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--embeds", type=path_arg, nargs="+", required=True)
    p.add_argument("--state", type=path_arg, required=True)
    p.add_argument("--trait", type=path_arg, required=True)
    p.add_argument("--out", type=path_arg, required=True)

    def run(a):
        from paperflow.core.io import Stage, write_json
        from paperflow.fmri import plan
        from paperflow.fmri.benchmarks import run_benchmarks

        prm = job_params(a, "fmri", plan.eval_params)
        with Stage("fmri.evaluate", prm, outputs=[a.out], inputs=a.embeds, seed=prm["seed"]) as st:
            res = run_benchmarks(prm, a.embeds, a.state, a.trait)
            write_json(a.out, res)
            st.metrics.update({f"{t}/{k}": v["mean"] for t, d in res["tasks"].items() for k, v in d.items() if "mean" in v})
    return run


@study.stage("scaling", "validation loss vs pretraining data: points, power-law fits, curve")
def _scaling(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--runs", type=path_arg, nargs="+", required=True, help="result.json of each scaling run")
    p.add_argument("--noise", type=path_arg, default=None, help="geometry dir (for the analytic noise floor)")
    p.add_argument("--out", type=path_arg, required=True, help="output directory")

    def run(a):
        from paperflow.core.io import Stage, atomic_path
        from paperflow.fmri.scaling import scaling_outputs

        with Stage("fmri.scaling", {"runs": [str(r) for r in a.runs]}, outputs=[a.out], inputs=a.runs) as st:
            with atomic_path(a.out) as tmp:
                st.metrics.update(scaling_outputs(a.runs, tmp))
    return run


@study.stage("report", "figures + results/fmri/summary.md (claims vs measured)")
def _report(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--geometry", type=path_arg, required=True)
    p.add_argument("--metrics", type=path_arg, required=True)
    p.add_argument("--scaling", type=path_arg, default=None)
    p.add_argument("--pretrain", type=path_arg, nargs="*", default=[], help="result.json of the main runs")
    p.add_argument("--prep", type=path_arg, nargs="*", default=[], help="prep dirs (manifests give throughput)")
    p.add_argument("--state", type=path_arg, required=True)
    p.add_argument("--summary", type=path_arg, required=True)
    p.add_argument("--figdir", type=path_arg, required=True)

    def run(a):
        from paperflow.fmri import plan
        from paperflow.fmri.report import make_report

        prm = job_params(a, "fmri", plan.report_params)
        make_report(prm, a)
    return run

