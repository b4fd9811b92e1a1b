"""Hyper-ICL: logit adapter + query-adaptive gate + hyperbolic (Lorentz) anchor distillation vs ICL and PEFT arms.

Stages (spec vision_language_b §5; everything beyond the abstract is a reconstruction):
data (episodes of the tiny attribute world) → base (the shared small transformer, pre-trained once per seed)
→ arms (per seed × group of arms, on every target task: train the student modules, evaluate) → aggregate →
figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.hyper_icl import plan

log = logging.getLogger(__name__)

VLM_MSG = ("backend 'vlm' (paper scale: a VLM through HiFICL's harness) is not implemented in this "
           "reconstruction; `backend: hf_lm` runs the same study on a Hugging Face causal LM (config/paper.yaml)")


class DataParams(TypedDict):
    seed: int
    vis_dim: int
    noise: float
    n_demos: int
    p_permuted: float
    n_pretrain: int
    n_pretrain_val: int
    n_target_train: int
    n_val: int
    n_test: int
    demo_draws: int
    warm_colours: list[int]


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write the episodes (schema: data.py / README): world, pre-training, T1 and T2 splits."""
    from paperflow.hyper_icl.data import write_world

    with Stage("hyper_icl.data", config=params, outputs=[out], seed=params["seed"]) as st:
        st.metrics = write_world(out, params)
    return st.metrics


class BaseParams(TypedDict):
    seed: int
    backend: str
    d_model: int
    heads: int
    layers: int
    steps: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup: float
    ckpt_every: int
    hf_lm: NotRequired[dict[str, Any]]  # backend hf_lm only


@stage(plan=plan.base_params)
def base(params: BaseParams, *, data: Path, weights: Path, out: Path, ckpt: Path) -> dict[str, Any]:
    """Pre-train the base model of one seed (resumable from `ckpt`); its ICL curve on held-out episodes to `out`."""
    import shutil

    if params["backend"] == "vlm":
        raise NotImplementedError(VLM_MSG)
    if params["backend"] == "hf_lm":
        return _base_hf_lm(params, data=data, weights=weights, out=out)
    from paperflow.core.checkpoint import save_weights
    from paperflow.hyper_icl.data import PRETRAIN_TASKS, load_split
    from paperflow.hyper_icl.train import icl_curve, train_base

    seed = int(params["seed"])
    with Stage("hyper_icl.base", config=params, outputs=[weights, out], inputs=[data / "pretrain.npz"],
               seed=seed) as st:
        net, hist = train_base(params, load_split(data, "pretrain"), seed, ckpt)
        assert net is not None
        curve = icl_curve(net, load_split(data, "pretrain_val"), list(PRETRAIN_TASKS))
        save_weights(weights, net, metadata={"seed": str(seed)})
        write_json(out, {"params": dict(params), "history": hist, "icl_curve": curve})
        st.metrics = {"icl_acc_by_k": curve["all"]}
    shutil.rmtree(ckpt, ignore_errors=True)
    return st.metrics


class ArmsParams(TypedDict):
    targets: list[str]
    seed: int
    chunk: int
    arms: list[str]
    backend: str
    warm_colours: list[int]
    d_model: int
    heads: int
    layers: int
    rank: int
    gate_hidden: int
    vkv_slots: int
    shift_sites: list[str]
    lora_rank: int
    adapter_lr: float
    adapter_batch: int
    adapter_steps: int
    lambda_ce: float
    alpha: float
    beta: float
    kd_temperature: float
    distill_layers: list[int]
    layer_weights: list[float]
    curvature: float
    map_scale: float
    r_max_times_inv_sqrt_c: float
    arcosh_eps: float
    max_param_ratio: float
    hf_lm: NotRequired[dict[str, Any]]  # backend hf_lm only


@stage(plan=plan.arms_params)
def arms(params: ArmsParams, *, data: Path, weights: Path, out: Path) -> dict[str, Any]:
    """Train and evaluate one group of arms on every target task with one seed's base model."""
    if params["backend"] == "vlm":
        raise NotImplementedError(VLM_MSG)
    if params["backend"] == "hf_lm":
        return _arms_hf_lm(params, data=data, weights=weights, out=out)
    import torch

    from paperflow.core.checkpoint import load_weights
    from paperflow.hyper_icl.data import load_split
    from paperflow.hyper_icl.model import build_base
    from paperflow.hyper_icl.train import param_band, run_arms

    seed = int(params["seed"])
    targets = list(params["targets"])
    splits = {t: {s: load_split(data, f"{t}_{s}") for s in ("train", "val", "test")} for t in targets}
    torch.set_grad_enabled(True)
    with Stage("hyper_icl.arms", config=params, outputs=[out], seed=seed,
               inputs=[weights] + [data / f"{t}_{s}.npz" for t in targets for s in ("train", "val", "test")]) as st:
        net = build_base(splits[targets[0]]["train"]["vis"].shape[-1], params)
        load_weights(weights, net)
        for prm in net.parameters():
            prm.requires_grad_(False)
        counts = param_band(net, params)  # raises when an arm leaves the band around (f)
        log.info("trainable parameters (ratio to (f)): %s", counts)
        result: dict[str, Any] = {"params": dict(params), "targets": {}, "param_band": counts}
        for t in targets:
            res = run_arms(list(params["arms"]), net, params, splits[t], t, list(params["warm_colours"]), seed)
            result["targets"][t] = _target_result(res, splits[t]["test"]["label"])
            st.metrics[t] = {a: r["acc"] for a, r in res.items()}
        write_json(out, result)
    return st.metrics


def _target_result(arms: dict[str, Any], y: Any) -> dict[str, Any]:
    """One target task's record of an arms job: per-arm results, query ids, majority-class chance."""
    import numpy as np

    return {"arms": arms, "qid": list(range(len(y))), "chance": float(np.bincount(y).max() / len(y))}


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _base_hf_lm(params: Any, *, data: Path, weights: Path, out: Path) -> dict[str, Any]:
    """hf_lm: the LM (optionally trained on the pre-training episodes: tiny-llama only) and its ICL curve. The
    weights file holds the tiny LM's weights, or, for a loaded LM, no tensors and its path in the metadata (the
    LM itself is never re-trained or copied)."""
    from paperflow.core.checkpoint import save_weights
    from paperflow.hyper_icl import hf_lm
    from paperflow.hyper_icl.data import load_split

    hp, seed = params["hf_lm"], int(params["seed"])
    with Stage("hyper_icl.base", config=params, outputs=[weights, out], inputs=[data / "pretrain.npz"],
               seed=seed) as st:
        lm, tok = hf_lm.load_lm(hp, seed, _device())
        codec = hf_lm.make_codec(tok, hp)
        hist = hf_lm.pretrain(lm, codec, load_split(data, "pretrain"), hp, seed, float(hp["pretrain_lr"]),
                              int(params["batch_size"]))
        curve = hf_lm.icl_curve(lm, codec, load_split(data, "pretrain_val"), int(hp["eval_batch"]))
        meta = {"seed": str(seed), "hf_model_path": str(hp["model_path"])}
        save_weights(weights, lm if hp["model_path"] in (hf_lm.TINY, hf_lm.TINY_VLM) else {}, metadata=meta)
        write_json(out, {"params": dict(params), "history": hist, "icl_curve": curve})
        st.metrics = {"icl_acc_by_k": curve["all"]}
    return st.metrics


def _arms_hf_lm(params: Any, *, data: Path, weights: Path, out: Path) -> dict[str, Any]:
    import torch

    from paperflow.core.checkpoint import load_weights
    from paperflow.hyper_icl import hf_lm
    from paperflow.hyper_icl.data import load_split

    hp, seed = params["hf_lm"], int(params["seed"])
    targets = list(params["targets"])
    splits = {t: {s: load_split(data, f"{t}_{s}") for s in ("train", "val", "test")} for t in targets}
    torch.set_grad_enabled(True)
    with Stage("hyper_icl.arms", config=params, outputs=[out], seed=seed,
               inputs=[weights] + [data / f"{t}_{s}.npz" for t in targets for s in ("train", "val", "test")]) as st:
        lm, tok = hf_lm.load_lm(hp, seed, _device())
        if hp["model_path"] in (hf_lm.TINY, hf_lm.TINY_VLM):
            lm.load_state_dict({k: v.to(next(lm.parameters()).device) for k, v in load_weights(weights).items()})
        codec = hf_lm.make_codec(tok, hp)
        counts = hf_lm.hf_param_band(lm, params, list(params["arms"]))  # raises outside the band / unknown arms
        result: dict[str, Any] = {"params": dict(params), "targets": {}, "param_band": counts}
        for t in targets:
            res = hf_lm.run_arms(list(params["arms"]), lm, codec, params, splits[t], t,
                                 list(params["warm_colours"]), seed)
            result["targets"][t] = _target_result(res, splits[t]["test"]["label"])
            st.metrics[t] = {a: r["acc"] for a, r in res.items()}
        write_json(out, result)
    return st.metrics


@stage()
def aggregate(inputs: list[Path], *, bases: list[Path], out: Path) -> dict[str, Any]:
    """Collect the arms jobs and base curves into metrics.json: per target, arm and seed."""
    from paperflow.hyper_icl.report import aggregate_runs

    with Stage("hyper_icl.aggregate", config={"n_inputs": len(inputs)}, outputs=[out],
               inputs=list(inputs) + list(bases)) as st:
        m = aggregate_runs([read_json(f) for f in inputs], [read_json(b) for b in bases])
        write_json(out, m)
        st.metrics = {"n_jobs": len(inputs)}
    return m


@stage()
def figures(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Accuracy by arm (mean over seeds, 95% t CI) per target task (params: the config section)."""
    from paperflow.hyper_icl.report import accuracy_figure

    with Stage("hyper_icl.figures", config={}, outputs=[out], inputs=[metrics]):
        accuracy_figure(read_json(metrics), out)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.hyper_icl.report import write

    write(read_json(metrics), params, out, [str(metrics)])
