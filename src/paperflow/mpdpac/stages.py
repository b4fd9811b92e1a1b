"""MPD-PAC: Mask Prior Suppression + Monotonic RoPE Scaling on a tiny masked-diffusion captioner.

data (synthetic scenes .npz) → train (tiny LLaDA-style backbone, one per seed) → decode (one job per
seed × decoding condition; every arm of the condition) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.mpdpac import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    grid: int
    n_colours: int
    n_shapes: int
    min_objects: int
    max_objects: int
    len_min: int
    len_max: int
    fixed_length: int | None
    n_train: int
    n_test: int
    seed: int


class TrainParams(TypedDict):
    steps: int
    batch_size: int
    lr: float
    eos_weight: float
    weight_decay: float
    warmup: float
    grad_clip: float
    ckpt_every: int
    model: dict[str, Any]
    seed: int


class DecodeParams(TypedDict):
    seed: int
    condition: dict[str, Any]
    arms: list[dict[str, Any]]
    model: dict[str, Any]
    mrs: dict[str, Any]
    n_eval: int
    n_calib: int
    batch_size: int
    block_len: int
    attention: bool
    k: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, Any]:
    """Generate the synthetic scenes (train + test) and write them to one .npz (schema in the README)."""
    from paperflow.mpdpac.data import write_scenes

    with Stage("mpdpac.data", config=params, outputs=[out], seed=params["seed"]) as st:
        info = write_scenes(params, out, params["seed"])
        st.metrics = info
    return info


@stage(plan=plan.train_params)
def train(params: TrainParams, *, data: Path, out: Path, ckpt: Path) -> dict[str, Any] | None:
    """Train the tiny masked-diffusion backbone for one seed; resumable from `ckpt`."""
    import shutil

    from paperflow.mpdpac.train import train_model

    with Stage("mpdpac.train", config=params, outputs=[out], inputs=[data], seed=params["seed"]) as st:
        res = train_model(params, data, out, ckpt_dir=ckpt)
        st.metrics = {k: v for k, v in (res or {}).items() if k != "loss_curve"}
        st.extra["loss_curve"] = (res or {}).get("loss_curve", [])
    shutil.rmtree(ckpt, ignore_errors=True)  # the final weights are written: the checkpoint is spent
    return res


@stage(plan=plan.evaluate_params)
def decode(params: DecodeParams, *, data: Path, model: Path, out: Path) -> dict[str, Any]:
    """Decode the test scenes under every arm of one condition; per-item metrics and diagnostics."""
    from paperflow.mpdpac.evaluate import run_condition

    with Stage("mpdpac.decode", config=params, outputs=[out], inputs=[data, model], seed=params["seed"]) as st:
        res = run_condition(params, data, model)
        write_json(out, res)
        st.metrics = {a: r["summary"] for a, r in res["arms"].items()}
    return res


@stage()
def aggregate(inputs: list[Path], *, out: Path) -> dict[str, Any]:
    """Collect every decode job into metrics.json: condition → arm → seed → results."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    conds: dict[str, Any] = {}
    for f in inputs:
        r = read_json(f)
        cond = r["condition"]["name"]
        conds[cond] = r["condition"]
        for arm, res in r["arms"].items():
            runs.setdefault(cond, {}).setdefault(arm, {})[str(r["seed"])] = res
    metrics = {"conditions": conds, "runs": runs, "n_inputs": len(inputs)}
    with Stage("mpdpac.aggregate", config={"n_inputs": len(inputs)}, outputs=[out], inputs=inputs) as st:
        write_json(out, metrics)
        st.metrics = {"n_conditions": len(runs)}
    return metrics


@stage()
def figures(params: dict[str, Any], *, metrics: Path, outdir: Path) -> list[Path]:
    """Drift by step, the decoding grid and visual attention (params: the study's config section)."""
    from paperflow.mpdpac.figures import make_all

    outs = [Path(outdir) / n for n in plan.FIGURES]
    with Stage("mpdpac.figures", config={}, outputs=outs, inputs=[metrics]):
        return make_all(read_json(metrics), plan.report_params(params), Path(outdir))


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers, verdicts (params: the study's config section)."""
    from paperflow.mpdpac.report import write

    write(read_json(metrics), plan.report_params(params), out, [str(metrics)])
