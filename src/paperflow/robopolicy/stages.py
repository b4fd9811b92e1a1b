"""LARA (LAM<->VLA alignment) and GAM (reconstruction), evaluated closed-loop in the simulator.

Stages (one rule each, `rules/robopolicy.smk`): LARA data -> lam-pretrain (S1, per seed) -> train (S2+S3,
variant x seed) -> evaluate (variant x seed) -> lara-report; GAM gam-run (per seed) -> gam-report; then
`summary` (the combined summary registered for the study). The robotics study is used only through its
public interface `paperflow.robotics.api` (simulator, dataset writer/reader, frozen stem, ridge probe).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.robopolicy import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    sim: dict[str, Any]  # robotics simulator parameters
    extract: dict[str, Any]  # robotics extractor parameters


class LamParams(TypedDict):
    """S1 (built by `plan.lam_params`)."""

    horizon: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup: float
    log_every: int
    ckpt_every: int
    net: dict[str, Any]
    s1_steps: int
    image_size: int


class TrainParams(LamParams):
    """S2 + S3 of one variant (built by `plan.train_params`)."""

    variant: str
    tasks_a: list[str]
    tasks_b: list[str]
    s2_steps: int
    s3_steps: int
    s3_demos: int
    w_align: float
    w_lam: float


class EvalParams(TrainParams):
    """Closed-loop and offline evaluation of one variant (built by `plan.eval_params`)."""

    eval: dict[str, Any]
    euler_steps: int
    templates: list[str]
    render: dict[str, Any]
    resize_mode: str


class StoppedEarly(Exception):
    """Raised inside a training stage's atomic writer so a deliberately stopped run leaves no output."""


def _data_id(path: Path, name: str = "stats.json") -> str:
    """A cheap identity of an input directory: the digest of one file that changes with it (the extracted
    dataset's train statistics, or a model's weights)."""
    from paperflow.core.io import file_digest

    return file_digest(Path(path) / name)


def _resume(out: Path, every: int, stop_after: int | None, job: dict[str, Any]) -> Any:
    """Resumable state of a training stage in <out>.resume/, tied to the job (params, seed, inputs)."""
    from paperflow.core.config import config_hash
    from paperflow.robopolicy.lara import Resume

    return Resume(Path(str(out) + ".resume"), every, stop_after, config_hash(job))


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, Any]:
    """Simulator episodes (robotics simulator) -> Bridge raw tree -> extracted Arrow dataset."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.robotics.api import simulate_dataset

    out = Path(out)
    with Stage("robopolicy.data", config=dict(params), outputs=[out], seed=params["sim"]["seed"]) as st:
        with atomic_path(out) as tmp:
            res = simulate_dataset(tmp, params["sim"], params["extract"])
        st.metrics.update(res["counts"])
        st.metrics["kept"] = res["manifest"]["kept"]
    return res


@stage("lam-pretrain", plan=plan.lam_params)
def lam_pretrain(params: LamParams, *, data: Path, seed: int, out: Path,
                 stop_after: int | None = None) -> dict[str, Any] | None:
    """LARA stage S1: the tiny LAM alone on all simulator video (resumable from <out>.resume/)."""
    import shutil

    from paperflow.core.checkpoint import save_weights
    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.core.seeding import seed_everything
    from paperflow.robopolicy import lara
    from paperflow.robotics.api import read_stats

    prm = dict(params)
    seed_everything(seed)
    stats = read_stats(data)
    d = lara.load_demos(data, "train", stats)
    lam = lara.make_lam(prm, prm["image_size"])
    rows: list[dict] = []
    resume = _resume(out, prm["ckpt_every"], stop_after, {"params": prm, "seed": seed, "data": _data_id(data)})
    if not lara.train_lam(lam, d, {**prm, "stats": stats}, seed, rows, resume):
        log.info("stopped after %s steps; checkpoint kept in %s", stop_after, resume.dir)
        return None
    with Stage("robopolicy.lam_pretrain", config=prm, outputs=[out], inputs=[data], seed=seed) as st:
        with atomic_path(out) as tmp:
            tmp.mkdir()
            save_weights(tmp / "lam.safetensors", lam)
            write_json(tmp / "log.json", rows)
        st.metrics["final_lam_loss"] = rows[-1]["lam"] if rows else None
    shutil.rmtree(resume.dir, ignore_errors=True)
    return {"log": rows}


@stage(plan=plan.train_params)
def train(params: TrainParams, *, data: Path, lam: Path, seed: int, out: Path,
          stop_after: int | None = None) -> dict[str, Any] | None:
    """LARA stages S2 (tasks A) + S3 (post-training on held-out tasks B) for one variant (resumable)."""
    import shutil

    from paperflow.core.checkpoint import load_weights, save_weights
    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.core.seeding import seed_everything
    from paperflow.robopolicy import lara
    from paperflow.robotics.api import read_stats

    prm = dict(params)
    seed_everything(seed)
    stats = read_stats(data)
    q = {**prm, "stats": stats}
    vla = lara.make_vla(prm)
    lam_model = None
    if prm["variant"] != "dit_only":
        lam_model = lara.make_lam(prm, prm["image_size"])
        load_weights(Path(lam) / "lam.safetensors", lam_model)
    rows: list[dict] = []
    resume = _resume(out, prm["ckpt_every"], stop_after, {"params": prm, "seed": seed, "data": _data_id(data),
                                                          "lam": _data_id(lam, "lam.safetensors")})
    da = lara.load_demos(data, "train", stats, prm["tasks_a"])
    db = lara.load_demos(data, "train", stats, prm["tasks_b"], prm["s3_demos"])
    ok = True
    if resume.saved_phase() != "S3":
        ok = lara.train_joint(vla, lam_model, da, q, prm["s2_steps"], seed, "S2", rows, resume)
    if ok:
        ok = lara.train_joint(vla, lam_model, db, q, prm["s3_steps"], seed, "S3", rows, resume)
    if not ok:
        log.info("stopped after %s steps; checkpoint kept in %s", stop_after, resume.dir)
        return None
    with Stage("robopolicy.train", config=prm, outputs=[out], inputs=[data, lam], seed=seed) as st:
        with atomic_path(out) as tmp:
            tmp.mkdir()
            save_weights(tmp / "vla.safetensors", vla)
            if lam_model is not None:
                save_weights(tmp / "lam.safetensors", lam_model)
            write_json(tmp / "log.json", rows)
        st.metrics.update({"n_demos_a": len(da.lengths), "n_demos_b": len(db.lengths),
                           "final": rows[-1] if rows else None})
    shutil.rmtree(resume.dir, ignore_errors=True)
    return {"log": rows}


@stage(plan=plan.eval_params)
def evaluate(params: EvalParams, *, data: Path, lam: Path, model: Path, seed: int, out: Path) -> dict[str, Any]:
    """Closed-loop success (simulator), offline action MSE, LAM probe for one trained variant."""
    import numpy as np

    from paperflow.core.checkpoint import load_weights
    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.core.seeding import seed_everything
    from paperflow.robopolicy import lara
    from paperflow.robotics.api import read_stats

    prm = dict(params)
    seed_everything(seed)
    stats = read_stats(data)
    q = {**prm, "stats": stats}
    vla = lara.make_vla(prm)
    load_weights(Path(model) / "vla.safetensors", vla)
    vla.eval()
    ev = prm["eval"]
    res: dict = {"variant": prm["variant"], "seed": seed, "templates": prm["templates"], "closed_loop": {}}
    for k in ev["exec_indices"]:
        pol = lara.VLAPolicy(vla, stats, prm["image_size"], prm["resize_mode"], prm["euler_steps"], k, seed)
        for cname, over in ev["conditions"].items():
            res["closed_loop"][f"{cname}/chunk{k}"] = lara.closed_loop(pol, prm["render"], prm["templates"], ev,
                                                                       seed, over)
    held = lara.load_demos(data, "test", stats, prm["templates"])
    if len(held.lengths) == 0:
        held = lara.load_demos(data, "val", stats, prm["templates"])
    res["offline_mse"] = lara.offline_mse(vla, held, q, seed)
    res["n_heldout_demos"] = len(held.lengths)
    # LAM refinement: probe the LAM embed after S1 and after joint training (c.4-style ridge NMSE)
    tr_all = lara.load_demos(data, "train", stats)
    te_all = lara.load_demos(data, "test", stats)
    if prm["variant"] != "dit_only":
        lam1 = lara.make_lam(prm, prm["image_size"])
        load_weights(Path(lam) / "lam.safetensors", lam1)
        lam2 = lara.make_lam(prm, prm["image_size"])
        load_weights(Path(model) / "lam.safetensors", lam2)
        res["lam_probe_s1"] = lara.lam_probe(lam1.eval(), tr_all, te_all, q)
        res["lam_probe_final"] = lara.lam_probe(lam2.eval(), tr_all, te_all, q)
        res["lam_param_change"] = float(sum((x - y).abs().sum() for x, y in
                                            zip(lam1.state_dict().values(), lam2.state_dict().values())))
    pol = lara.VLAPolicy(vla, stats, prm["image_size"], prm["resize_mode"], prm["euler_steps"], 0, seed)
    frames = lara.example_frames(pol, prm["render"], prm["templates"], ev, seed)
    with Stage("robopolicy.evaluate", config=prm, outputs=[out], inputs=[data, model], seed=seed) as st:
        write_json(out, res)
        with atomic_path(Path(out).with_name("frames.npz")) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, frames=frames)
        st.metrics.update({k: v["success_rate"] for k, v in res["closed_loop"].items()})
        st.metrics["offline_mse"] = res["offline_mse"]
    return res


def _by_variant(paths: list[Path], level: int, variants: list[str], what: str) -> dict[str, Path]:
    """Map each path to the variant named by its `level`-th parent (0: the path itself), never by position
    (Snakemake does not keep the declared order of an output list); every variant exactly once."""
    got = {Path(p).parents[level - 1].name if level else Path(p).name: Path(p) for p in paths}
    if len(got) != len(list(paths)) or set(got) != set(variants):
        raise SystemExit(f"lara-seed: --{what} must hold one path per variant {sorted(variants)}, "
                         f"got {sorted(got)} from {len(list(paths))} paths")
    return got


@stage("lara-seed", plan=plan.seed_group)
def lara_seed(params: dict[str, Any], *, data: Path, lam: Path, seed: int, models: list[Path],
              metrics: list[Path]) -> dict[str, Any]:
    """S2+S3 training, then evaluation, of every variant of one seed in one process (`lara.jobs: seed`).

    Each variant is exactly what the `train` and `evaluate` stages write for it: the same functions with
    the same parameters, each reseeding from its own seed, so models, metrics, frames and manifests are
    the per-variant jobs' (checked byte for byte, README). `--models` are the `<models>/<variant>/seed<s>`
    directories and `--metrics` the `<results>/lara/<variant>/seed<s>/metrics.json` files, matched to the
    variants by name. A killed job reruns the seed's variants (Snakemake removes an incomplete job's
    outputs); the variant in training resumes from its `<model>.resume/` checkpoint."""
    groups = params["variants"]
    names = list(groups)
    mdirs = _by_variant(models, 1, names, "models")
    mfiles = _by_variant(metrics, 2, names, "metrics")
    res: dict[str, Any] = {}
    for v in names:
        train(groups[v]["train"], data=data, lam=lam, seed=seed, out=mdirs[v])
        res[v] = evaluate(groups[v]["eval"], data=data, lam=lam, model=mdirs[v], seed=seed, out=mfiles[v])
    return res


@stage("lara-report", plan=plan.lara_report_params)
def lara_report(params: dict[str, Any], *, data: Path, metrics: list[Path], outdir: Path) -> None:
    """LARA: aggregate, oracle/random reference, figures, summary.md with verdicts."""
    from paperflow.robopolicy import report

    report.lara_report(dict(params), str(data), [str(m) for m in metrics], Path(outdir))


@stage("gam-data", plan=plan.gam_data_params)
def gam_data(params: dict[str, Any], *, out: Path) -> dict[str, Any]:
    """GAM (tabletop world): every seed's recorded course demos -> Bridge raw tree -> extracted dataset."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.robopolicy import gam
    from paperflow.robotics.api import simulate_course_dataset

    out = Path(out)
    with Stage("robopolicy.gam_data", config=dict(params), outputs=[out]) as st:
        with atomic_path(out) as tmp:
            sessions = gam.tabletop_sessions(dict(params), list(params["seeds"]))
            res = simulate_course_dataset(tmp, sessions, params["extract"])
        st.metrics.update(episodes=res["episodes"], kept=res["manifest"]["kept"],
                          expert_success=sum(bool(r["success"]) for v in sessions.values() for _, r in v))
    return st.metrics


@stage("gam-run", plan=plan.gam_params)
def gam_run(params: dict[str, Any], *, seed: int, out: Path, data: Path | None = None) -> dict[str, Any]:
    """GAM [reconstruction]: demos (tabletop world: read from --data, gam-data's extracted dataset), fit every
    representation, closed-loop test for one seed."""
    import warnings

    from paperflow.core.io import Stage, write_json
    from paperflow.robopolicy import gam

    warnings.filterwarnings("ignore", category=UserWarning)
    with Stage("robopolicy.gam_run", config=dict(params), outputs=[out], seed=seed,
               inputs=[data] if data else []) as st:
        res = gam.run_seed(dict(params), seed, data)
        write_json(out, res)
        st.metrics["success"] = {c: {m: sum(v["success"]) / len(v["success"]) for m, v in per.items()}
                                 for c, per in res["conditions"].items()}
    return res


@stage("gam-report", plan=plan.gam_report_params)
def gam_report(params: dict[str, Any], *, runs: list[Path], outdir: Path) -> None:
    """GAM: aggregate over seeds, figures, summary.md with verdicts."""
    from paperflow.robopolicy import report

    report.gam_report(dict(params), [str(r) for r in runs], Path(outdir))


@stage()
def summary(*, out: Path, summaries: list[Path] = []) -> None:  # noqa: B006 - read-only default
    """Combined summary (LARA + GAM claims) registered for the study key `robopolicy`."""
    from paperflow.robopolicy import report

    report.combined_summary([str(s) for s in summaries], Path(out))
