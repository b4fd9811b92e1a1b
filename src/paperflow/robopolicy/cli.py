"""`paperflow robopolicy <stage>`: LARA (data -> lam-pretrain -> train -> evaluate -> lara-report) and
GAM (gam-run -> gam-report), then `summary` (the combined summary registered for the study).

Rules pass `--params JSON`; by hand, pass `--config FILE` (plus `--variant/--seed` where needed) and
the same planning functions in `paperflow.robopolicy.plan` derive the parameters.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paperflow.core.cli import Study, add_config_args, job_params

study = Study("robopolicy", "LARA (LAM<->VLA alignment) and GAM (reconstruction), evaluated closed-loop in the simulator")
STUDIES = [study]


def _threads() -> None:
    import os

    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


@study.stage("data", "simulator episodes (robotics simulator + writer) -> Bridge raw tree -> extracted Arrow dataset")
def _data(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--out", required=True, help="extracted dataset directory")

    def run(a: argparse.Namespace) -> None:
        import shutil

        from paperflow.core.io import Stage, atomic_path
        from paperflow.robopolicy import plan
        from paperflow.robotics.bridge import extract
        from paperflow.robotics.simdata import generate

        prm = job_params(a, "robopolicy", plan.data_params)
        out = Path(a.out)
        with Stage("robopolicy.data", config=prm, outputs=[out], seed=prm["sim"]["seed"]) as st:
            with atomic_path(out) as tmp:
                raw = tmp.parent / "raw_tree" / "raw"
                counts = generate(raw, prm["sim"])
                man = extract(raw, tmp, prm["extract"])
                shutil.rmtree(raw.parent)
            st.metrics.update(counts)
            st.metrics["kept"] = man["kept"]

    return run


def _model_args(p: argparse.ArgumentParser) -> None:
    add_config_args(p)
    p.add_argument("--data", required=True)
    p.add_argument("--seed", type=int, required=True)


@study.stage("lam-pretrain", "LARA stage S1: the tiny LAM alone on all simulator video")
def _lam(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    _model_args(p)
    p.add_argument("--out", required=True, help="model directory")

    def run(a: argparse.Namespace) -> None:
        import torch

        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.core.seeding import seed_everything
        from paperflow.robopolicy import lara, plan
        from paperflow.robotics.data import read_stats

        _threads()
        prm = job_params(a, "robopolicy", plan.lam_params)
        seed_everything(a.seed)
        stats = read_stats(a.data)
        d = lara.load_demos(a.data, "train", stats)
        lam = lara.make_lam(prm, prm["image_size"])
        log: list[dict] = []
        lara.train_lam(lam, d, {**prm, "stats": stats}, a.seed, log)
        with Stage("robopolicy.lam_pretrain", config=prm, outputs=[a.out], inputs=[a.data], seed=a.seed) as st:
            with atomic_path(a.out) as tmp:
                tmp.mkdir()
                torch.save(lam.state_dict(), tmp / "lam.pt")
                write_json(tmp / "log.json", log)
            st.metrics["final_lam_loss"] = log[-1]["lam"] if log else None

    return run


@study.stage("train", "LARA stages S2 (tasks A) + S3 (post-training on held-out tasks B) for one variant")
def _train(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    _model_args(p)
    p.add_argument("--lam", required=True, help="S1 LAM directory")
    p.add_argument("--variant", required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import torch

        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.core.seeding import seed_everything
        from paperflow.robopolicy import lara, plan
        from paperflow.robotics.data import read_stats

        _threads()
        prm = job_params(a, "robopolicy", lambda c: plan.train_params(c, a.variant))
        seed_everything(a.seed)
        stats = read_stats(a.data)
        q = {**prm, "stats": stats}
        vla = lara.make_vla(prm)
        lam = None
        if prm["variant"] != "dit_only":
            lam = lara.make_lam(prm, prm["image_size"])
            lam.load_state_dict(torch.load(Path(a.lam) / "lam.pt", weights_only=True, map_location="cpu"))
        log: list[dict] = []
        da = lara.load_demos(a.data, "train", stats, prm["tasks_a"])
        lara.train_joint(vla, lam, da, q, prm["s2_steps"], a.seed, "S2", log)
        db = lara.load_demos(a.data, "train", stats, prm["tasks_b"], prm["s3_demos"])
        lara.train_joint(vla, lam, db, q, prm["s3_steps"], a.seed, "S3", log)
        with Stage("robopolicy.train", config=prm, outputs=[a.out], inputs=[a.data, a.lam], seed=a.seed) as st:
            with atomic_path(a.out) as tmp:
                tmp.mkdir()
                torch.save(vla.state_dict(), tmp / "vla.pt")
                if lam is not None:
                    torch.save(lam.state_dict(), tmp / "lam.pt")
                write_json(tmp / "log.json", log)
            st.metrics.update({"n_demos_a": len(da.lengths), "n_demos_b": len(db.lengths),
                               "final": log[-1] if log else None})

    return run


@study.stage("evaluate", "closed-loop success (simulator), offline action MSE, LAM probe for one trained variant")
def _evaluate(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    _model_args(p)
    p.add_argument("--lam", required=True, help="S1 LAM directory")
    p.add_argument("--model", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import numpy as np
        import torch

        from paperflow.core.io import Stage, atomic_path, write_json
        from paperflow.core.seeding import seed_everything
        from paperflow.robopolicy import lara, plan
        from paperflow.robotics.data import read_stats

        _threads()
        prm = job_params(a, "robopolicy", lambda c: plan.eval_params(c, a.variant))
        seed_everything(a.seed)
        stats = read_stats(a.data)
        q = {**prm, "stats": stats}
        vla = lara.make_vla(prm)
        vla.load_state_dict(torch.load(Path(a.model) / "vla.pt", weights_only=True, map_location="cpu"))
        vla.eval()
        ev = prm["eval"]
        res: dict = {"variant": prm["variant"], "seed": a.seed, "templates": prm["templates"], "closed_loop": {}}
        for k in ev["exec_indices"]:
            pol = lara.VLAPolicy(vla, stats, prm["image_size"], prm["resize_mode"], prm["euler_steps"], k, a.seed)
            for cname, over in ev["conditions"].items():
                res["closed_loop"][f"{cname}/chunk{k}"] = lara.closed_loop(pol, prm["render"], prm["templates"], ev,
                                                                           a.seed, over)
        held = lara.load_demos(a.data, "test", stats, prm["templates"])
        if len(held.lengths) == 0:
            held = lara.load_demos(a.data, "val", stats, prm["templates"])
        res["offline_mse"] = lara.offline_mse(vla, held, q, a.seed)
        res["n_heldout_demos"] = len(held.lengths)
        # LAM refinement: probe the LAM embed after S1 and after joint training (c.4-style ridge NMSE)
        tr_all = lara.load_demos(a.data, "train", stats)
        te_all = lara.load_demos(a.data, "test", stats)
        if prm["variant"] != "dit_only":
            lam1 = lara.make_lam(prm, prm["image_size"])
            lam1.load_state_dict(torch.load(Path(a.lam) / "lam.pt", weights_only=True, map_location="cpu"))
            lam2 = lara.make_lam(prm, prm["image_size"])
            lam2.load_state_dict(torch.load(Path(a.model) / "lam.pt", weights_only=True, map_location="cpu"))
            res["lam_probe_s1"] = lara.lam_probe(lam1.eval(), tr_all, te_all, q)
            res["lam_probe_final"] = lara.lam_probe(lam2.eval(), tr_all, te_all, q)
            res["lam_param_change"] = float(sum((x - y).abs().sum() for x, y in
                                                zip(lam1.state_dict().values(), lam2.state_dict().values())))
        pol = lara.VLAPolicy(vla, stats, prm["image_size"], prm["resize_mode"], prm["euler_steps"], 0, a.seed)
        frames = lara.example_frames(pol, prm["render"], prm["templates"], ev, a.seed)
        with Stage("robopolicy.evaluate", config=prm, outputs=[a.out], inputs=[a.data, a.model], seed=a.seed) as st:
            write_json(a.out, res)
            with atomic_path(Path(a.out).with_name("frames.npz")) as tmp:
                with open(tmp, "wb") as fh:
                    np.savez_compressed(fh, frames=frames)
            st.metrics.update({k: v["success_rate"] for k, v in res["closed_loop"].items()})
            st.metrics["offline_mse"] = res["offline_mse"]

    return run


@study.stage("lara-report", "LARA: aggregate, oracle/random reference, figures, summary.md")
def _lara_report(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--data", required=True)
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.robopolicy import plan, report

        prm = job_params(a, "robopolicy", plan.lara_report_params)
        report.lara_report(prm, a.data, a.metrics, Path(a.outdir))

    return run


@study.stage("gam-run", "GAM [reconstruction]: demos, fit every representation, closed-loop test for one seed")
def _gam_run(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import warnings

        from paperflow.core.io import Stage, write_json
        from paperflow.robopolicy import gam, plan

        warnings.filterwarnings("ignore", category=UserWarning)
        prm = job_params(a, "robopolicy", plan.gam_params)
        with Stage("robopolicy.gam_run", config=prm, outputs=[a.out], seed=a.seed) as st:
            res = gam.run_seed(prm, a.seed)
            write_json(a.out, res)
            st.metrics["success"] = {c: {m: sum(v["success"]) / len(v["success"]) for m, v in per.items()}
                                     for c, per in res["conditions"].items()}

    return run


@study.stage("gam-report", "GAM: aggregate over seeds, figures, summary.md")
def _gam_report(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.robopolicy import plan, report

        prm = job_params(a, "robopolicy", plan.gam_params)
        report.gam_report(prm, a.runs, Path(a.outdir))

    return run


@study.stage("summary", "combined summary (LARA + GAM claims) registered for the study key `robopolicy`")
def _summary(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    p.add_argument("--summaries", nargs="*", default=[])
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.robopolicy import report

        report.combined_summary(a.summaries, Path(a.out))

    return run

