"""ExpAlign: expectation-alignment head, top-K multi-positive loss and GACO for open-vocabulary grounding.

synth (synthetic COCO JSON + image array) → prep (the one COCO/LVIS loader) → text (MiniLM token
embeddings, once) → train (arm × seed) → evaluate (per seed, every arm) → aggregate → figures, summary.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, config_hash, read_json, write_json
from paperflow.expalign import plan

log = logging.getLogger(__name__)


class SynthParams(TypedDict):
    n_train: int
    n_val: int
    n_test: int
    image_size: int
    max_objects: int
    rare_frac: float
    colour_jitter: int
    noise: float
    seed: int


@stage(plan=plan.synth_params)
def synth(params: SynthParams, *, outdir: Path) -> dict[str, Any]:
    """Write annotations_{train,val,test}.json (COCO format, RLE masks) + images_{train,val,test}.npy; val is
    held out from the generated training images."""
    from paperflow.expalign.data import SynthCfg, generate

    outdir = Path(outdir)
    outs = [outdir / f"{k}_{s}.{e}" for s in ("train", "val", "test") for k, e in (("annotations", "json"), ("images", "npy"))]
    with Stage("expalign.synth", config=params, outputs=outs, seed=params["seed"]) as st:
        generate(SynthCfg.from_params(params), outdir)
        st.metrics = {"n_train": params["n_train"], "n_val": params["n_val"], "n_test": params["n_test"]}
    return st.metrics


class PrepParams(TypedDict):
    source: str
    image_size: int
    max_train_images: int | None
    max_val_images: int | None
    max_test_images: int | None


@stage(plan=plan.prep_params)
def prep(params: PrepParams, *, train_json: Path, train_images: Path, val_json: Path, val_images: Path,
         test_json: Path, test_images: Path, outdir: Path) -> dict[str, Any]:
    """Validate and load the three splits with the one loader (all share the train file's vocabulary); write
    train.safetensors, val.safetensors (model selection only), test.safetensors and meta.json. Nothing is
    written unless every split loads."""
    from paperflow.expalign.data import DataError, load_coco, save_split, shared_images

    outdir = Path(outdir)
    src = {"train": (train_json, train_images), "val": (val_json, val_images), "test": (test_json, test_images)}
    for x, y in (("train", "val"), ("train", "test"), ("val", "test")):
        both = shared_images(*src[x], *src[y])
        if both:
            raise DataError(f"{src[y][0]}: {len(both)} images are also in the {x} split {src[x][0]} "
                            f"(first: {both[0]}); the {x} and {y} splits must be disjoint")
    S = int(params["image_size"])
    tr, cats = load_coco(train_json, images=train_images, image_size=S, max_images=params["max_train_images"])
    phrases = [c["phrase"] for c in cats]
    va, _ = load_coco(val_json, images=val_images, image_size=S, phrases=phrases,
                      max_images=params["max_val_images"])
    te, cats_te = load_coco(test_json, images=test_images, image_size=S, phrases=phrases,
                            max_images=params["max_test_images"])
    for c, ct in zip(cats, cats_te):  # rare flags: the test file's (LVIS minival carries the frequencies)
        if ct.get("frequency"):
            c["frequency"] = ct["frequency"]
    rare = [c["phrase"] for c in cats if c["frequency"] == "r"]
    leak = [p for i, p in enumerate(phrases) if cats[i]["frequency"] == "r" and tr.pos[:, i].any()]
    meta = {"phrases": phrases, "categories": cats, "n_train": int(len(tr.images)), "n_val": int(len(va.images)),
            "n_test": int(len(te.images)),
            "image_size": S, "n_rare": len(rare), "rare_positive_in_train": leak,
            "train_instances": int(len(tr.inst_cat)), "val_instances": int(len(va.inst_cat)),
            "test_instances": int(len(te.inst_cat))}
    outs = [outdir / "train.safetensors", outdir / "val.safetensors", outdir / "test.safetensors",
            outdir / "meta.json"]
    with Stage("expalign.prep", config=params, outputs=outs,
               inputs=[train_json, val_json, test_json]) as st:
        save_split(outs[0], tr)
        save_split(outs[1], va)
        save_split(outs[2], te)
        write_json(outs[3], meta)
        st.metrics = {k: meta[k] for k in ("n_train", "n_val", "n_test", "n_rare", "train_instances",
                                           "val_instances", "test_instances")}
        st.metrics["rare_positive_in_train"] = len(leak)
    return meta


class TextParams(TypedDict):
    styles: dict[str, str]


@stage(plan=plan.text_params)
def text(params: TextParams, *, meta: Path, out: Path) -> dict[str, Any]:
    """MiniLM-L6 token embeddings of every phrase in every prompt style (computed once, safetensors)."""
    from paperflow.expalign.text import write_text_embeddings

    phrases = read_json(meta)["phrases"]
    with Stage("expalign.text", config={**params, "phrases": phrases}, outputs=[out], inputs=[meta]) as st:
        shapes = write_text_embeddings(phrases, dict(params["styles"]), out)
        st.metrics = {k: list(v) for k, v in shapes.items()}
    return st.metrics


class TrainParams(TypedDict):
    arm_name: str
    arm: dict[str, Any]
    seed: int
    model: dict[str, Any]
    train: dict[str, Any]


def ckpt_dir_for(out: Path, params: Any) -> Path:
    """Checkpoints live beside the weights, keyed by the job's parameters (a changed config never resumes
    from an old run's state)."""
    return Path(out).parent / f"ckpt-{config_hash(dict(params))[:12]}"


@stage(plan=plan.train_params)
def train(params: TrainParams, *, data: Path, text: Path, out: Path, stop_after: int | None = None) -> dict[str, Any]:
    """Train one arm × seed (resumable); writes model.safetensors. `stop_after` (tests): stop after that
    many steps, leaving only the checkpoint."""
    from paperflow.core.checkpoint import save_weights
    from paperflow.expalign.data import read_split
    from paperflow.expalign.text import read_text_embeddings
    from paperflow.expalign.train import train as run

    out = Path(out)
    ckpt = ckpt_dir_for(out, params)
    split = read_split(data)
    txt = read_text_embeddings(text, params["arm"]["prompt"])
    with Stage("expalign.train", config=params, outputs=[out], inputs=[data, text], seed=params["seed"]) as st:
        model, info = run(params, split, txt, ckpt_dir=ckpt, stop_after=stop_after)
        if model is None:
            raise _Stopped(f"stopped after {info['steps']} steps; checkpoint in {ckpt}")
        save_weights(out, model)
        st.metrics = {"final_loss": info["losses_every"][-1] if info["losses_every"] else None,
                      "losses_every": info["losses_every"], "resumed_from": info["resumed_from"],
                      "train_s": round(info["train_s"], 3), "steps": info["steps"]}
    shutil.rmtree(ckpt, ignore_errors=True)
    return st.metrics


class _Stopped(RuntimeError):
    """Raised inside the Stage block so that no output and no manifest are written."""


class EvalParams(TypedDict):
    seed: int
    arms: dict[str, Any]
    eval: dict[str, Any]


@stage(plan=plan.eval_params)
def evaluate(params: EvalParams, *, test: Path, meta: Path, text: Path, models: list[Path], out: Path) -> dict[str, Any]:
    """Score every arm's model of one seed on the test split; writes <out>.json and the example maps
    (<out stem>.examples.safetensors) the figures use."""
    import numpy as np
    from safetensors.numpy import save_file

    from paperflow.core.checkpoint import load_weights
    from paperflow.core.io import atomic_path
    from paperflow.expalign.data import read_split
    from paperflow.expalign.evaluate import evaluate as run
    from paperflow.expalign.text import read_text_embeddings
    from paperflow.expalign.train import build_model, text_tensors

    # models/<name>/<arm>/s<seed>/model.safetensors: match by the arm directory, never by order (the
    # --params JSON may list arms in another order than the rule lists the files)
    by_arm = {Path(m).parent.parent.name: Path(m) for m in models}
    if set(by_arm) != set(params["arms"]):
        raise ValueError(f"evaluate: arms {sorted(params['arms'])} but model files for {sorted(by_arm)}")
    arms = sorted(params["arms"])
    split = read_split(test)
    cats = read_json(meta)["categories"]
    out = Path(out)
    ex_path = out.with_suffix(".examples.safetensors")
    ev = params["eval"]
    res: dict[str, Any] = {"seed": params["seed"], "arms": {}}
    examples: dict[str, np.ndarray] = {}
    with Stage("expalign.evaluate", config=params, outputs=[out, ex_path], inputs=[test, meta, text, *models],
               seed=params["seed"]) as st:
        for arm in arms:
            mpath = by_arm[arm]
            tp = params["arms"][arm]
            txt = text_tensors(read_text_embeddings(text, tp["arm"]["prompt"]))
            model = build_model(tp, txt["tokens"].shape[-1])
            load_weights(mpath, model)
            m, ex = run(model, split, txt, cats, rho=float(tp["arm"]["rho"]), pooling=tp["arm"]["pooling"],
                        box_threshold=float(ev["box_threshold"]), phrases_per_image=int(ev["phrases_per_image"]),
                        n_examples=int(ev["n_examples"]))
            res["arms"][arm] = m
            for k, v in ex.items():
                if k in ("images", "pos"):
                    examples[k] = np.ascontiguousarray(v)
                else:
                    examples[f"{arm}.{k}"] = np.ascontiguousarray(v)
            log.info("%s seed %d: pointing %s", arm, params["seed"], m["pointing"]["acc"])
        write_json(out, res)
        with atomic_path(ex_path) as tmp:
            save_file({k: (v.astype(np.uint8) if v.dtype == bool else v) for k, v in examples.items()}, str(tmp))
        st.metrics = {a: {"pointing": v["pointing"]["acc"], "ap50": v["box"]["ap50"]} for a, v in res["arms"].items()}
    return res


@stage()
def aggregate(inputs: list[Path], *, meta: Path, out: Path) -> dict[str, Any]:
    """Collect every seed's evaluation into metrics.json: per arm, per metric, per split, the per-seed values."""
    from paperflow.expalign.report import collect

    runs = [read_json(p) for p in inputs]
    metrics = collect(runs, read_json(meta))
    with Stage("expalign.aggregate", config={"n_inputs": len(inputs)}, outputs=[out], inputs=[*inputs, meta]) as st:
        write_json(out, metrics)
        st.metrics = {"arms": sorted(metrics["arms"]), "seeds": metrics["seeds"]}
    return metrics


@stage()
def figures(*, metrics: Path, examples: Path, meta: Path, outdir: Path) -> list[Path]:
    """Pointing / heat maps on test examples and the metric bars per arm."""
    from paperflow.expalign.figures import FIGURES, make_all

    outs = [Path(outdir) / f for f in FIGURES]
    with Stage("expalign.figures", config={}, outputs=outs, inputs=[metrics, examples, meta]):
        return make_all(read_json(metrics), examples, read_json(meta), Path(outdir))


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers, verdicts (params: the study's config section)."""
    from paperflow.expalign.report import write

    write(read_json(metrics), params, out, [str(metrics)])
