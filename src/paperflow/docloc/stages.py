"""JKO evidence localisation for document VQA: JKO arms against single-step, no-W2 and PoE controls.

Stages (spec doc_localization.md; everything beyond the abstract is a reconstruction):
data (synthetic DocVQA-format pages) → prep (load + validate annotation/OCR/images, line-token features)
→ train (one arm × seed: train, then evaluate on val / test_id / test_ood) and mechanics (fixed
potentials, spec §5) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.docloc import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    grid: int
    sections: list[int]
    blocks: list[int]
    distractors: list[int]
    distractors_ood: list[int]
    distractor_other_section: float
    vocab_size: int
    n_headers: int
    n_train: int
    n_val: int
    n_test: int
    seed: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write the synthetic pages: <split>.json annotations, ocr/<page>.json, documents/<page>.png."""
    from paperflow.docloc.data import write_synthetic

    with Stage("docloc.data", config=params, outputs=[out], seed=params["seed"]) as st:
        counts = write_synthetic(out, params, int(params["seed"]))
        st.metrics = counts
    log.info("wrote %s", counts)
    return counts


class PrepParams(TypedDict):
    source: str
    splits: dict[str, dict[str, str]] | None
    features: dict[str, int]


@stage(plan=plan.prep_params)
def prep(params: PrepParams, *, out: Path, synthetic: Path | None = None) -> dict[str, int]:
    """Load and validate every split (annotation + OCR + images), write line-token features per split
    (<split>.npz) and the answer candidates (<split>.values.json) into the directory `out`."""
    from paperflow.core.io import atomic_path
    from paperflow.docloc.data import featurise, line_values, load_split, save_features, write_values

    f = params["features"]
    if params["source"] == "synthetic":
        if synthetic is None:
            raise ValueError("prep: source 'synthetic' needs --synthetic DIR (the data stage's output)")
        paths = {s: {"annotations": str(synthetic / f"{s}.json"), "ocr_dir": str(synthetic / "ocr"),
                     "images_dir": str(synthetic / "documents")} for s in plan.SPLITS}
    else:
        paths = dict(params["splits"] or {})
        missing = [s for s in plan.SPLITS if s not in paths]
        if missing:
            raise ValueError(f"prep: data.docvqa.splits lacks {missing}")
    counts = {}
    # every split is loaded and validated before anything is written: bad input leaves no output
    loaded = {s: load_split(paths[s]["annotations"], paths[s]["ocr_dir"], paths[s].get("images_dir"))
              for s in plan.SPLITS}
    inputs = [paths[s]["annotations"] for s in plan.SPLITS]
    with Stage("docloc.prep", config=params, outputs=[out], inputs=inputs) as st:
        with atomic_path(out) as tmp:
            tmp.mkdir(parents=True)
            for s, qas in loaded.items():
                save_features(tmp / f"{s}.npz", featurise(qas, int(f["grid"]), int(f["dim"]), int(f["max_q"]),
                                                          int(f["hash_seed"])))
                write_values(tmp / f"{s}.values.json", line_values(qas))
                counts[s] = len(qas)
        st.metrics = counts
    return counts


class TrainParams(TypedDict):
    variant: str
    arm: str
    seed: int
    d_model: int
    layers: int
    heads: int
    channels: int
    dilations: list[int]
    stages: int
    tau: float
    eps: float
    beta: float
    sinkhorn_iters: int
    v_range: NotRequired[float]  # jko_a only
    target_sigma: float
    steps: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup: float
    grad_clip: float
    ckpt_every: int
    kl_direction: str
    jko_a_scale: float
    n_examples: int


@stage(plan=plan.train_params)
def train(params: TrainParams, *, features: Path, out: Path, weights: Path, ckpt: Path,
          examples: Path) -> dict[str, Any]:
    """Train one arm × seed (resumable from `ckpt`), then evaluate it on val, test_id and test_ood:
    per-question metrics to `out`, final weights to `weights`, the first OOD pages' densities to `examples`."""
    import shutil

    import numpy as np

    from paperflow.core.checkpoint import save_weights
    from paperflow.core.io import atomic_path
    from paperflow.docloc.data import load_features
    from paperflow.docloc.train import choose_gamma, evaluate_split, infer, train_arm

    arm, seed = params["arm"], int(params["seed"])
    feats = {s: load_features(features / f"{s}.npz") for s in plan.SPLITS}
    values = {s: read_json(features / f"{s}.values.json") for s in plan.SPLITS}
    inputs = [features / f"{s}.npz" for s in plan.SPLITS]
    with Stage("docloc.train", config=params, outputs=[out, weights, examples], inputs=inputs, seed=seed) as st:
        net, history = train_arm(arm, params, feats["train"], seed, ckpt)
        assert net is not None
        gamma, gamma_scores = (choose_gamma(net, params, feats["val"], values["val"]) if arm == "poe"
                               else (1.0, {}))
        result: dict[str, Any] = {"params": dict(params), "history": history, "gamma": gamma,
                                  "gamma_val_acc50": gamma_scores, "splits": {}}
        n_ex = int(params["n_examples"])
        ex: dict[str, np.ndarray] = {}
        for s in ("val", "test_id", "test_ood"):
            rhos = infer(arm, net, params, feats[s], gamma=gamma)
            result["splits"][s] = evaluate_split(rhos, feats[s], values[s])
            if s == "test_ood":
                ex = {"rho": np.stack([r[:n_ex] for r in rhos]).astype(np.float32),
                      "qid": feats[s]["qid"][:n_ex]}
        save_weights(weights, net, metadata={"arm": arm, "variant": params["variant"], "seed": str(seed)})
        with atomic_path(examples) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **ex)
        write_json(out, result)
        st.metrics = {s: {k: float(np.mean([q[k] for q in rows])) for k in ("acc50", "iou", "mass", "em", "anls")}
                      for s, rows in result["splits"].items()}
        log.info("%s s%d: %s", params["variant"], seed, st.metrics)
    shutil.rmtree(ckpt, ignore_errors=True)  # the run finished: its resumable state is no longer needed
    return result


class MechanicsParams(TypedDict):
    grid: int
    pages: int
    blocks: int
    noise: float
    prior_sigma: float
    offsets: list[float]
    taus: list[float]
    ks: list[int]
    eps: float
    beta: float
    iters: int
    seed: int
    judge_tau: float
    judge_k: int


@stage(plan=plan.mechanics_params)
def mechanics(params: MechanicsParams, *, out: Path) -> dict[str, Any]:
    """Arm (vi): the fixed-potential rerun of spec §5 (evidence-block accuracy of Gibbs, blob, PoE, JKO)."""
    from paperflow.docloc.mechanics import run

    with Stage("docloc.mechanics", config=params, outputs=[out], seed=params["seed"]) as st:
        res = run(params)
        write_json(out, res)
        st.metrics = {off: {k: float(sum(v) / len(v)) for k, v in r.items()} for off, r in res["per_page"].items()}
    return res


@stage()
def aggregate(inputs: list[Path], *, mechanics: Path | None = None, out: Path) -> dict[str, Any]:
    """Collect every run into metrics.json: per variant, seed and split, the per-question metrics."""
    from paperflow.docloc.report import aggregate_runs

    runs = [read_json(f) for f in inputs]
    with Stage("docloc.aggregate", config={"n_inputs": len(inputs)}, outputs=[out],
               inputs=list(inputs) + ([mechanics] if mechanics else [])) as st:
        metrics = aggregate_runs(runs, read_json(mechanics) if mechanics else None)
        write_json(out, metrics)
        st.metrics = {"n_runs": len(runs)}
    return metrics


@stage()
def figures(*, metrics: Path, features: Path, examples: list[Path], outdir: Path) -> list[Path]:
    """IoU by stage, evidence maps ρ_k on OOD example pages, the mechanics table as a figure."""
    from paperflow.docloc.figures import FIGURES, make_all

    outs = [Path(outdir) / n for n in FIGURES]
    with Stage("docloc.figures", config={}, outputs=outs, inputs=[metrics, *examples]):
        return make_all(read_json(metrics), features, examples, outdir)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.docloc.report import write

    write(read_json(metrics), params, out, [str(metrics)])
