"""Staged RL (From Seeing to Thinking): perception → text → visual reasoning RL vs merged, on a tiny slot world.

Stages (spec vision_language_b §6): data (slot scenes, captions, the RL sets and test sets) → base (per seed:
supervised warm-up, the base model's perception filter, base evaluation) → arms (per seed × group of arms:
RL stages from the base, evaluation after every stage) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.staged_rl import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    seed: int
    n_slots: int
    feat_dim: int
    proto_scale: float
    confusable_dist: float
    sigma_img: float
    easy_max_objects: int
    warm_max_sum: int
    n_warmup: int
    n_perc_pool: int
    n_text: int
    n_vis: int
    n_describe: int
    n_test: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write the slot world (schema: data.py / README): prototypes, warm-up, perception pool, RL and test sets."""
    from paperflow.staged_rl.data import write_world

    with Stage("staged_rl.data", config=params, outputs=[out], seed=params["seed"]) as st:
        st.metrics = write_world(out, params)
    return st.metrics


class BaseParams(TypedDict):
    seed: int
    n_slots: int
    sigma_img: float
    d_model: int
    heads: int
    layers: int
    max_new: int
    max_looks: int
    eval_seed: int
    warmup_steps: int
    warmup_batch: int
    warmup_lr: float
    warmup_look_rate: float
    ckpt_every: int


@stage(plan=plan.base_params)
def base(params: BaseParams, *, data: Path, weights: Path, out: Path, ckpt: Path) -> dict[str, Any]:
    """Warm up one seed's base policy (resumable from `ckpt`), filter D_perc with it, evaluate it; to `out`."""
    import shutil

    import torch

    from paperflow.core.checkpoint import save_weights
    from paperflow.staged_rl.data import load_split, load_world
    from paperflow.staged_rl.train import evaluate, load_tests, perception_filter, warmup

    seed = int(params["seed"])
    torch.set_grad_enabled(True)
    protos = load_world(data)["protos"]
    with Stage("staged_rl.base", config=params, outputs=[weights, out], seed=seed,
               inputs=[data / "warmup.npz", data / "perc_pool.npz"]) as st:
        net, hist = warmup(params, load_split(data, "warmup"), protos, seed, ckpt)
        assert net is not None
        net.eval()
        filt = perception_filter(net, load_split(data, "perc_pool"), protos, params, seed)
        ev = evaluate(net, load_tests(data, params), protos, params, seed)
        save_weights(weights, net, metadata={"seed": str(seed)})
        write_json(out, {"params": dict(params), "history": hist, "filter": filt, "eval": ev})
        st.metrics = {"n_filtered": len(filt["keep"]), "vis_acc": ev["vis"]["acc"]}
    shutil.rmtree(ckpt, ignore_errors=True)
    return st.metrics


class ArmsParams(TypedDict):
    seed: int
    chunk: int
    arms: list[str]
    n_slots: int
    sigma_img: float
    d_model: int
    heads: int
    layers: int
    max_new: int
    max_looks: int
    eval_seed: int
    backend: str
    split: list[int]
    group_size: int
    prompts_per_update: int
    lr: float
    clip_eps: float
    kl_beta: float
    look_cost: float
    sft_lr: float
    ckpt_every: int
    trl: dict[str, Any]


@stage(plan=plan.arms_params)
def arms(params: ArmsParams, *, data: Path, weights: Path, base: Path, out: Path, ckpt: Path) -> dict[str, Any]:
    """Run one group of arms from one seed's base policy (grpo_lite or TRL); evaluate after every stage.
    Both backends resume from `ckpt` (finished arms and the current arm's training state: grpo_lite's own,
    TRL's Trainer checkpoints every `trl.save_steps`), removed once `out` is written."""
    import shutil

    import torch

    from paperflow.core.checkpoint import load_weights
    from paperflow.staged_rl.data import load_world
    from paperflow.staged_rl.model import build_policy
    from paperflow.staged_rl.train import load_sets, load_tests, run_arms

    seed = int(params["seed"])
    b = read_json(base)
    world = load_world(data)
    protos = world["protos"]
    torch.set_grad_enabled(True)
    with Stage("staged_rl.arms", config=params, outputs=[out], seed=seed, inputs=[weights, base]) as st:
        result: dict[str, Any] = {"params": dict(params), "arms": {}, "n_filtered": len(b["filter"]["keep"])}
        if params["backend"] == "trl":  # resumable per arm and per stage (trl_backend.run_arm_trl)
            from paperflow.core.checkpoint import finished_unit, keep_unit, stamp_job_dir
            from paperflow.staged_rl.trl_backend import run_arm_trl

            filt = b["filter"]
            t = params["trl"]
            if t.get("vlm") and t.get("filter_models") and not t.get("data_files"):  # the repo's filter, VLMs
                from paperflow.staged_rl.data import load_split
                from paperflow.staged_rl.trl_backend import load_vlm_model, vlm_perception_filter

                models = [load_vlm_model({**params, "trl": {**t, "model_path": None if m == "tiny" else m}}, seed)
                          for m in t["filter_models"]]
                filt = vlm_perception_filter(models, load_split(data, "perc_pool"))
                result["vlm_filter"], result["n_filtered"] = filt, len(filt["keep"])
            stamp_job_dir(ckpt, {"params": dict(params), "filter": filt})
            for arm in params["arms"]:
                done = finished_unit(ckpt, arm)
                if done is None:
                    done = run_arm_trl(arm, data, filt, params, seed, ckpt=Path(ckpt) / arm)
                    keep_unit(ckpt, arm, done)
                result["arms"][arm] = done
        else:
            base_net = build_policy(params, protos.shape[1])
            load_weights(weights, base_net)
            result["arms"] = run_arms(list(params["arms"]), base_net, b["eval"], load_sets(data, b["filter"], params,
                                                                                              seed),
                                      load_tests(data, params), protos, params, seed, ckpt)
        write_json(out, result)
        st.metrics = {a: r["stages"][-1]["eval"]["vis"]["acc"] for a, r in result["arms"].items()}
    shutil.rmtree(ckpt, ignore_errors=True)
    return st.metrics


@stage()
def aggregate(inputs: list[Path], *, bases: list[Path], out: Path) -> dict[str, Any]:
    """Collect the arms jobs and base runs into metrics.json: per arm, seed and stage."""
    from paperflow.staged_rl.report import aggregate_runs

    with Stage("staged_rl.aggregate", config={"n_inputs": len(inputs)}, outputs=[out],
               inputs=list(inputs) + list(bases)) as st:
        m = aggregate_runs([read_json(f) for f in inputs], [read_json(b) for b in bases])
        write_json(out, m)
        st.metrics = {"n_jobs": len(inputs)}
    return m


@stage()
def figures(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Accuracy by arm and stage on the three test sets (params: the config section)."""
    from paperflow.staged_rl.report import accuracy_figure

    with Stage("staged_rl.figures", config={}, outputs=[out], inputs=[metrics]):
        accuracy_figure(read_json(metrics), out)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.staged_rl.report import write

    write(read_json(metrics), params, out, [str(metrics)])
