"""Bridge V2 multi-view extraction, tabletop simulator, MVP-LAM vs single-view LAM.

Stages (one rule each, `rules/robotics.smk`): sim -> extract -> lam-train (model x seed) -> lam-eval
(model x seed) -> report. Parameters come from `paperflow.robotics.plan` (rules pass `--params JSON`;
by hand `--config FILE` plus the plan's coordinates derive the same job).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.robotics import plan

log = logging.getLogger(__name__)


class SimParams(TypedDict, total=False):
    """`simdata.generate` parameters (config `robotics.sim`)."""

    seed: int
    n_sessions: int
    episodes_per_session: int
    max_steps: int
    legacy_fraction: float
    legacy_policy_out_fraction: float
    permute_topics: bool
    folder_order: list[int] | None
    render: dict[str, Any]


class ExtractParams(TypedDict, total=False):
    """Extractor parameters (config `robotics.extract` without `raw_root`, which is the rule's input)."""

    image_size: int
    resize_mode: str
    require_views: list[int]
    keep_single_view: bool
    drop_first_step: bool
    depth: int
    extra_depths: list[int]
    scan_depth: int
    split_cuts: list[float]


class TrainParams(TypedDict):
    """One LAM run (built by `plan.train_params`): optimisation settings, the net and the model kind."""

    model: str  # mvp | single | single0
    frame_gap: int
    steps: int
    batch_size: int
    lr: float
    weight_decay: float
    reset_every: int
    log_every: int
    ckpt_every: int
    lam: dict[str, Any]


class EvalParams(TypedDict, total=False):
    """Action-centricity estimators (config `robotics.eval`)."""

    eval_stride: int
    pca_dim: int
    k_nn: int
    n_boot: int
    ood_source_tasks: list[str]
    ood_target_tasks: list[str]
    action_dims: list[int]


class CheckParams(TypedDict):
    """Action-visibility check (config `robotics.action_check` + the LAMs' frame gap, stride and stem)."""

    raw_size: int
    pca_dim: int
    n_boot: int
    visible_nmse: float
    margin: float
    min_pairs: int
    min_episodes: int
    frame_gap: int
    eval_stride: int
    action_dims: list[int]
    stem: dict[str, Any]


class ReportParams(TypedDict):
    models: list[str]
    seeds: list[int]
    eval: dict[str, Any]
    frame_gap: int
    steps: int
    real_data: bool
    claims: dict[str, Any]
    action_check: dict[str, Any]


@stage(plan=plan.sim_params)
def sim(params: SimParams, *, out: Path, truth: Path) -> dict[str, Any]:
    """Generate simulator episodes as a Bridge V2 raw tree (+ truth tree beside it, at <out>/../truth)."""
    from paperflow.core.io import Stage
    from paperflow.robotics.simdata import generate

    out, truth = Path(out), Path(truth)
    if truth.resolve() != (out.parent / "truth").resolve():
        raise SystemExit(f"--truth must be {out.parent / 'truth'}")
    for d in (out, truth):
        shutil.rmtree(d, ignore_errors=True)
    tmp_root = out.parent / f".{out.name}.tmp"
    shutil.rmtree(tmp_root, ignore_errors=True)
    with Stage("robotics.sim", config=dict(params), outputs=[out, truth], seed=params["seed"]) as st:
        # generate under a temp parent, then move raw/ and truth/ into place (atomic per tree)
        counts = generate(tmp_root / "raw", dict(params))
        (tmp_root / "truth").rename(truth)
        (tmp_root / "raw").rename(out)
        tmp_root.rmdir()
        st.metrics.update(counts)
    return counts


@stage(plan=plan.extract_params)
def extract(params: ExtractParams, *, raw: Path, out: Path) -> dict[str, Any]:
    """Bridge V2 raw tree (real or simulated) -> multi-view Arrow dataset + stats + manifest."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.robotics.bridge import extract as run_extract

    with Stage("robotics.extract", config=dict(params), outputs=[out], inputs=[]) as st:
        with atomic_path(out) as tmp:
            man = run_extract(raw, tmp, dict(params))
        st.metrics.update({"kept": man["kept"], "drop_reasons": man["drop_reasons"], "counts": man["counts"],
                           "summary": man["summary"]})
    return man


@stage("action-check", plan=plan.check_params)
def action_check(params: CheckParams, *, data: Path, out: Path) -> dict[str, Any]:
    """Can the action be read from the extracted frames at all? Ridge probes from raw frame differences
    and from the frozen random conv stem to the action, on held-out test episodes (issue 16 item 2)."""
    from paperflow.core.io import Stage, write_json
    from paperflow.robotics.visibility import action_visibility

    with Stage("robotics.action_check", config=dict(params), outputs=[out], seed=0) as st:
        vis = action_visibility(str(data), dict(params), seed=0)
        write_json(out, vis)
        st.metrics.update({"best": vis["best"], "nmse": {k: v["nmse"] for k, v in vis["probes"].items()}})
    return vis


@stage("lam-train", plan=plan.train_params)
def lam_train(params: TrainParams, *, data: Path, seed: int, out: Path,
              stop_after: int | None = None) -> dict[str, Any] | None:
    """Train one LAM (mvp | single | single0) for one seed; resumable from <out>.resume/.

    `stop_after` (tests, preemption drills): save a checkpoint after that many steps and return None
    without writing `out`; the next call resumes from it.
    """
    from paperflow.core.io import Stage, atomic_path
    from paperflow.robotics.train import train_lam

    try:
        with Stage("robotics.lam_train", config=dict(params), outputs=[out], seed=seed) as st:
            with atomic_path(out) as tmp:
                res = train_lam(data, tmp, dict(params), seed, resume_dir=Path(str(out) + ".resume"),
                                stop_after=stop_after)
                if res is None:
                    raise StoppedEarly(stop_after)
            st.metrics.update(res)
    except StoppedEarly:
        log.info("stopped after %s steps; checkpoint kept in %s.resume for the rerun", stop_after, out)
        return None
    return res


class StoppedEarly(Exception):
    """Raised inside a training stage's atomic writer so a deliberately stopped run leaves no output."""


@stage("lam-eval", plan=plan.eval_params)
def lam_eval(params: EvalParams, *, data: Path, model_dir: Path, seed: int, out: Path) -> dict[str, Any]:
    """Action-centricity of a trained LAM: KSG, mixed MI, Barber-Agakov bound, probes (spec c.4)."""
    from paperflow.core.io import Stage, write_json
    from paperflow.core.seeding import seed_everything
    from paperflow.robotics.evaluate import evaluate_lam

    seed_everything(seed)
    with Stage("robotics.lam_eval", config=dict(params), outputs=[out], seed=seed) as st:
        m = evaluate_lam(model_dir, data, dict(params), seed)
        write_json(out, m)
        st.metrics.update({"ksg_slot0": m["slot0"]["ksg"], "probe_nmse_slot0": m["slot0"]["probe_nmse"]})
    return m


@stage(plan=plan.report_params)
def report(params: ReportParams, *, data: Path, metrics: list[Path], outdir: Path,
           visibility: Path | None = None) -> None:
    """Aggregate LAM metrics; figures; summary.md with the action-visibility check first, then the
    MVP-LAM claims and verdicts."""
    from paperflow.robotics.report import report as write_report

    write_report(data, [str(m) for m in metrics], outdir, dict(params), visibility=visibility)
