"""ConsMSA: intra-/inter-modality consistency (I²CS) scoring, re-weighting and pruning for MSA (reconstruction).

Stages (spec vision_language_a.md §4): data (synthetic MMSA feature pickle + role sidecar) → train (a group
of variants × one seed: train, evaluate on valid/test, test-time pruning controls of the keep = 1.0 model)
→ aggregate → figures, summary. Real MOSI/MOSEI/CH-SIMS pickles are read by the same restricted loader.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.consmsa import plan
from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    dim: int
    seq_len: dict[str, int]
    n_train: int
    n_valid: int
    n_test: int
    informative_frac: list[float]
    redundant_frac: list[float]
    conflict_prob: float
    conflict_tokens: list[int]
    informative_noise: float
    redundant_noise: float
    neutral_scale: float
    seed: int


@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, int]:
    """Write <out>/synthetic.pkl (MMSA feature-pickle layout) and <out>/roles.safetensors (token roles)."""
    from paperflow.consmsa.data import write_synthetic

    with Stage("consmsa.data", config=params, outputs=[out], seed=params["seed"]) as st:
        counts = write_synthetic(out, params, int(params["seed"]))
        st.metrics = counts
    return counts


class TrainParams(TypedDict):
    group: str
    seed: int
    variants: dict[str, dict[str, Any]]


@stage(plan=plan.train_params)
def train(params: TrainParams, *, pickle: Path, out: Path, models: Path, roles: Path | None = None,
          ckpt: Path | None = None) -> dict[str, Any]:
    """Train and evaluate every variant of one job (one seed); results to `out`, weights to `models`/<variant>.
    `roles` (synthetic data only) enables the mechanism probes; `ckpt` holds resumable state."""
    import shutil

    from paperflow.consmsa.data import load_mmsa, load_roles
    from paperflow.consmsa.train import evaluate, train_variant
    from paperflow.core.checkpoint import save_weights

    splits = load_mmsa(pickle)
    role_arrays = load_roles(roles) if roles else None
    seed = int(params["seed"])
    outs = [out] + [models / v / "model.safetensors" for v in params["variants"]]
    inputs = [pickle] + ([roles] if roles else [])
    result: dict[str, Any] = {"group": params["group"], "seed": seed, "variants": {}}
    with Stage("consmsa.train", config=params, outputs=outs, inputs=inputs, seed=seed) as st:
        for v, p in params["variants"].items():
            ck = (ckpt / v) if ckpt else None
            net, history = train_variant(p, splits["train"], seed, ck)
            assert net is not None
            ev = evaluate(net, p, splits, role_arrays, seed)
            save_weights(models / v / "model.safetensors", net, metadata={"variant": v, "seed": str(seed)})
            result["variants"][v] = {"params": p, "history": history, **ev}
            st.metrics[v] = {k: ev["splits"]["test"][k] for k in ("mae", "corr", "acc7")}
            log.info("%s s%d test %s", v, seed, st.metrics[v])
        write_json(out, result)
    if ckpt:
        shutil.rmtree(ckpt, ignore_errors=True)  # finished: the resumable state is no longer needed
    return result


@stage()
def aggregate(inputs: list[Path], *, out: Path) -> dict[str, Any]:
    """Collect every job into metrics.json: per variant → seed → split metrics, test predictions, controls."""
    from paperflow.consmsa.report import aggregate_runs

    with Stage("consmsa.aggregate", config={"n_inputs": len(inputs)}, outputs=[out], inputs=list(inputs)) as st:
        metrics = aggregate_runs([read_json(f) for f in inputs])
        write_json(out, metrics)
        st.metrics = {"n_variants": len(metrics["variants"])}
    return metrics


@stage()
def figures(*, metrics: Path, outdir: Path) -> list[Path]:
    """Pruning curve: test MAE and kept-token precision vs keep ratio, trained (d) and test-time controls."""
    from paperflow.consmsa.figures import FIGURES, make_all

    outs = [Path(outdir) / n for n in FIGURES]
    with Stage("consmsa.figures", config={}, outputs=outs, inputs=[metrics]):
        return make_all(read_json(metrics), outdir)


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers with seeds and CIs, verdicts (params: the config section)."""
    from paperflow.consmsa.report import write

    write(read_json(metrics), params, out, [str(metrics)])
