"""Multimodal Interaction Gate: LSMI interaction scores decide which samples get a self-caption.

Stages (spec vision_language_b.md §9): data (synthetic data.json + image_features.npy) → gate (tiny
captioner, cross-fitted LSMI scores, sanity cross-tab, selections at every τ) → train (one arm × τ:
augmented text, re-estimated interactions, late-fusion model, every test condition under T0/T1) →
aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.mi_gate import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    n: int
    type_probs: list[float]
    image_dim: int
    image_noise: float
    split: list[float]
    seed: int
    split_seed: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write the synthetic interaction world: out/data.json and out/image_features.npy."""
    from paperflow.mi_gate.data import generate, write_dataset

    with Stage("mi_gate.data", config=params, outputs=[out], seed=params["seed"]) as st:
        records, images = generate(params)
        st.metrics = write_dataset(out, records, images)
    return st.metrics


class GateParams(TypedDict):
    taus: list[float]
    text: dict[str, int]
    captioner: dict[str, Any]
    estimator: dict[str, Any]


@stage(plan=plan.gate_params)
def gate(params: GateParams, *, data_json: Path, images: Path, out: Path, captioner: Path) -> dict[str, Any]:
    """Train the captioner (weights to `captioner`), score the train set with cross-fitted LSMI and apply
    the gate at every τ (gate.json to `out`)."""
    from paperflow.core.checkpoint import save_weights
    from paperflow.mi_gate.data import load_dataset
    from paperflow.mi_gate.train import run_gate

    ds = load_dataset(data_json, images)
    with Stage("mi_gate.gate", config=params, outputs=[out, captioner], inputs=[data_json, images],
               seed=int(params["estimator"]["seed"])) as st:
        cap, rec = run_gate(ds, params)
        save_weights(captioner, cap, metadata={"hidden": str(params["captioner"]["hidden"])})
        write_json(out, rec)
        st.metrics = {"means": rec["means"], "shares": rec["shares"], "n_valid": rec["n_valid"],
                      "selected": {k: len(v) for k, v in rec["selected"].items()}}
    log.info("gate: %s", st.metrics)
    return st.metrics


class TrainParams(TypedDict):
    variant: str
    arm: str
    tau: float | None
    seeds: list[int]
    text: dict[str, int]
    estimator: dict[str, Any]
    model: dict[str, Any]
    eval: dict[str, Any]
    random_words: list[str]
    vlm: NotRequired[dict[str, Any]]


@stage(plan=plan.train_params)
def train(params: TrainParams, *, data_json: Path, images: Path, gate: Path, captioner: Path,
          out: Path) -> dict[str, Any]:
    """One arm × τ for the job's seeds: training text, re-estimated interactions, the late-fusion model,
    accuracy / VIE / consistency / per-type accuracy for every test condition under T0 and T1."""
    import torch

    from paperflow.core.checkpoint import load_weights
    from paperflow.core.seeding import seed_everything
    from paperflow.mi_gate.data import load_dataset
    from paperflow.mi_gate.model import make_captioner
    from paperflow.mi_gate.train import run_seed, test_inputs

    ds = load_dataset(data_json, images)
    g = read_json(gate)
    state = load_weights(captioner)
    cap = make_captioner(torch, ds["train"].image.shape[1], int(state["0.weight"].shape[0]))
    cap.load_state_dict(state)
    cap.eval()
    with Stage("mi_gate.train", config=params, outputs=[out], inputs=[data_json, images, gate, captioner],
               seed=params["seeds"][0]) as st:
        per_seed = []
        if params["model"].get("kind") == "vlm":  # self-captions + LoRA SFT of the VLM (mi_gate/vlm.py)
            import tempfile

            from paperflow.mi_gate.vlm import run_seed_vlm

            for s in params["seeds"]:
                seed_everything(int(s))
                with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
                    per_seed.append(run_seed_vlm(params["arm"], params["tau"], int(s), ds, g, params, tmp))
        else:
            tests = test_inputs(ds["test"], cap, params)
            for s in params["seeds"]:
                seed_everything(int(s))
                per_seed.append(run_seed(params["arm"], params["tau"], int(s), ds, g, tests, params))
        write_json(out, {"params": dict(params), "seeds": per_seed})
        st.metrics = {str(r["seed"]): {"clean_T0": r["test"]["T0"]["clean"]["acc"]} for r in per_seed}
    log.info("%s: %s", params["variant"], st.metrics)
    return st.metrics


@stage()
def aggregate(inputs: list[Path], *, gate: Path, out: Path) -> dict[str, Any]:
    """Collect every run and the gate's record into metrics.json."""
    from paperflow.mi_gate.report import aggregate_runs

    with Stage("mi_gate.aggregate", config={"n_inputs": len(inputs)}, outputs=[out], inputs=[*inputs, gate]) as st:
        metrics = aggregate_runs([read_json(f) for f in inputs], read_json(gate))
        write_json(out, metrics)
        st.metrics = {"variants": len(metrics["runs"])}
    return metrics


@stage()
def figures(*, metrics: Path, out: Path, tau: float) -> Path:
    """VIE by corruption and arm at the judged τ (T0 and T1 panels)."""
    from paperflow.mi_gate.report import vie_figure

    with Stage("mi_gate.figures", config={"tau": tau}, outputs=[out], inputs=[metrics]):
        return vie_figure(read_json(metrics), out, tau)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.mi_gate.report import write

    write(read_json(metrics), params, out, [str(metrics)])
