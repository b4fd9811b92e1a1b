"""Video-BCI: integrate self-prior hypotheses with GRPO on r_acc + DUS + PTS (reconstruction) vs majority vote and controls.

Stages (spec vision_language_b §7; every formula is a reconstruction): data (frame-vector videos, questions with
decisive frames, fixed prior hypotheses) → arms (per seed × group of arms: train with grpo_lite or TRL, evaluate
on test) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.video_bci import plan

log = logging.getLogger(__name__)

SELF_PRIOR_MSG = ("prior_source 'self' (priors sampled from the policy's own no-hypothesis pass) runs on the trl "
                  "backend only (an HF LM or VLM, paper scale); the grpo_lite integrator uses prior_source: fixed")


class DataParams(TypedDict):
    seed: int
    frames: int
    noise: float
    p_count: float
    prior_source: str
    n_priors: int
    trace_frames: int
    p_hard: float
    p_easy_correct: float
    hard_m_probs: list[float]
    n_train: int
    n_val: int
    n_test: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, Any]:
    """Write train/val/test .npz and schema.json (keys, dtypes, shapes: data.py / README)."""
    from paperflow.video_bci.data import write_data  # prior_source self: the arms job replaces these priors

    with Stage("video_bci.data", config=params, outputs=[out], seed=params["seed"]) as st:
        st.metrics = write_data(out, params)
    return st.metrics


class ArmsParams(TypedDict):
    seed: int
    chunk: int
    arms: list[str]
    d_model: int
    heads: int
    layers: int
    backend: str
    group_size: int
    items_per_update: int
    updates: int
    lr: float
    clip_eps: float
    grad_clip: float
    eval_every: int
    ckpt_every: int
    lambda_dus: float
    lambda_pts: float
    dus_mode: str
    pts_gate: str
    resample_hard_frac: float
    w_fmt: float
    trl_model_path: str | None
    trl_hidden: int
    trl_layers: int
    trl_lr: float
    trl_beta: float
    trl_prompts_per_step: int
    trl_max_completion_length: int
    trl_save_steps: int
    trl_vlm: bool
    self_prior_temperature: float
    prior_source: NotRequired[str]


@stage(plan=plan.arms_params)
def arms(params: ArmsParams, *, data: Path, out: Path, ckpt: Path) -> dict[str, Any]:
    """Train and evaluate one group of arms with one seed (backend grpo_lite or trl); both resume from
    `ckpt` (finished arms and the current arm's training state), removed once `out` is written."""
    import shutil

    import torch

    from paperflow.video_bci.data import SPLITS, load_split

    seed = int(params["seed"])
    splits = {s: load_split(data, s) for s in SPLITS}
    torch.set_grad_enabled(True)
    with Stage("video_bci.arms", config=params, outputs=[out], seed=seed,
               inputs=[data / f"{s}.npz" for s in SPLITS]) as st:
        if params.get("prior_source") == "self" and params["backend"] != "trl":
            raise NotImplementedError(SELF_PRIOR_MSG)
        if params["backend"] == "trl":  # resumable: finished arms kept, TRL checkpoints every trl_save_steps
            from paperflow.core.checkpoint import stamp_job_dir
            from paperflow.video_bci.trl_backend import run_arms_trl

            stamp_job_dir(ckpt, {"params": dict(params)})
            res = run_arms_trl(list(params["arms"]), params, splits, seed, Path(ckpt), resumable=True)
            assert res is not None
        else:
            from paperflow.video_bci.train import run_arms

            res = run_arms(list(params["arms"]), params, splits, seed, ckpt)
        write_json(out, {"params": dict(params), "arms": res, "n_test": int(len(splits["test"]["y"]))})
        st.metrics = {a: {k: r[k] for k in ("acc", "minority_recovery", "trace_iou")} for a, r in res.items()}
    shutil.rmtree(ckpt, ignore_errors=True)
    return st.metrics


@stage()
def aggregate(inputs: list[Path], *, data: Path, out: Path) -> dict[str, Any]:
    """Collect the arms jobs into metrics.json: per arm and seed (plus the data's split statistics)."""
    from paperflow.video_bci.data import load_split
    from paperflow.video_bci.report import aggregate_runs

    with Stage("video_bci.aggregate", config={"n_inputs": len(inputs)}, outputs=[out],
               inputs=list(inputs) + [data / "test.npz"]) as st:
        m = aggregate_runs([read_json(f) for f in inputs], read_json(data / "schema.json"), load_split(data, "test"))
        write_json(out, m)
        st.metrics = {"n_jobs": len(inputs)}
    return m


@stage()
def figures(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Minority recovery and accuracy by arm: mean over seeds with a t CI at the 0.95 level (params: the config section)."""
    from paperflow.video_bci.report import minority_figure

    with Stage("video_bci.figures", config={}, outputs=[out], inputs=[metrics]):
        minority_figure(read_json(metrics), out)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.video_bci.report import write

    write(read_json(metrics), params, out, [str(metrics)])
