"""PIAA: training-free multi-label recognition by patch-level inference and adaptive aggregation.

generate (synthetic list-form dataset) → prepare (the one loader, real or synthetic) → text (frozen
sentence embeddings) → train (tiny CLIP, the only training; per seed) → evaluate (PVCL + arms; per
seed) → aggregate → figures → summary.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.core.io import Stage, read_json, write_json
from paperflow.piaa import plan

log = logging.getLogger(__name__)


class GenerateParams(TypedDict):
    seed: int
    n_train: int
    n_test: int
    image_size: int
    patch_size: int
    max_objects: int
    max_area_patches: int
    area_alpha: float
    context_corr: float


@stage(plan=plan.generate_params)
def generate(params: GenerateParams, *, out: Path) -> dict[str, Any]:
    """Write the synthetic scenes as a PIAA list-form dataset (PNGs, *_labels.txt, classes, objects)."""
    from paperflow.piaa.data import generate as gen

    with Stage("piaa.generate", config=params, outputs=[out], seed=params["seed"]) as st:
        st.metrics = gen(params, Path(out))
    return st.metrics


@stage(plan=plan.prepare_params)
def prepare(params: dict[str, Any], *, out: Path, raw: Path | None = None) -> dict[str, Any]:
    """Read the train/test lists and their images through the loader into one safetensors file.
    Synthetic: `--raw` is the generated tree; real: the paths in params (config data.*)."""
    from paperflow.piaa.data import prepare as prep

    if raw is not None:
        paths = {"img_root": Path(raw) / "images", "train_list": Path(raw) / "train_labels.txt",
                 "test_list": Path(raw) / "test_labels.txt", "classes_file": Path(raw) / "classes.txt",
                 "objects": Path(raw) / "objects.jsonl"}
    else:
        paths = {k: (Path(params[k]) if params.get(k) else None)
                 for k in ("img_root", "train_list", "test_list", "classes_file", "objects")}
    inputs = [p for k, p in paths.items() if p is not None and k != "img_root"]
    with Stage("piaa.prepare", config=params, outputs=[out], inputs=inputs) as st:
        st.metrics = prep(params, out=Path(out), **paths)  # type: ignore[arg-type]
    return st.metrics


@stage(plan=plan.text_params)
def text(params: dict[str, Any], *, data: Path, out: Path) -> dict[str, Any]:
    """Frozen sentence embeddings of the class prompts and of every train/test caption (safetensors)."""
    import numpy as np
    from safetensors.numpy import save_file

    from paperflow.core.io import atomic_path
    from paperflow.piaa.data import captions, load_prepared, prompts
    from paperflow.piaa.text import encode_texts

    arrays, meta = load_prepared(data)
    classes = meta["classes"]
    caps = {s: captions(arrays[f"{s}_labels"], classes) for s in ("train", "test")}
    uniq = sorted(set(caps["train"]) | set(caps["test"]))
    pos = {c: i for i, c in enumerate(uniq)}
    texts = prompts(classes, params["template"]) + uniq
    with Stage("piaa.text", config=params, outputs=[out], inputs=[data]) as st:
        emb = encode_texts(texts, params["encoder"], params["hash_dim"])
        C = len(classes)
        res = {"prompts": emb[:C], "captions": emb[C:],
               "train_caption": np.array([pos[c] for c in caps["train"]], np.int64),
               "test_caption": np.array([pos[c] for c in caps["test"]], np.int64)}
        with atomic_path(out) as tmp:
            save_file(res, str(tmp))
        st.metrics = {"n_prompts": C, "n_captions": len(uniq), "dim": int(emb.shape[1])}
    return st.metrics


class TrainParams(TypedDict):
    seed: int
    vit: dict[str, Any]
    train: dict[str, Any]


@stage(plan=plan.train_params)
def train(params: TrainParams, *, data: Path, text: Path, out: Path, ckpt: Path,
          stop_after: int | None = None) -> dict[str, Any]:
    """Train the tiny CLIP contrastively, resumable; write weights + config to `out`/.

    Checkpoints go to `ckpt`/<params hash>; `--stop-after N` stops after N steps (checkpoint kept), a rerun
    resumes."""
    from safetensors.numpy import load_file

    from paperflow.core.checkpoint import save_weights
    from paperflow.core.io import atomic_path
    from paperflow.core.seeding import seed_everything
    from paperflow.nn.vision import modality_gap
    from paperflow.piaa import model as mdl
    from paperflow.piaa.data import load_prepared

    from paperflow.core.config import config_hash

    seed_everything(params["seed"])
    arrays, _ = load_prepared(data)
    ckpt = Path(ckpt) / config_hash(dict(params))[:16]  # a checkpoint of other parameters is never resumed
    tx = load_file(str(text))
    with Stage("piaa.train", config=params, outputs=[out], inputs=[data, text], seed=params["seed"]) as st:
        m, info = mdl.train(params, arrays["train_images"], tx["train_caption"], tx["captions"], ckpt_dir=ckpt,
                            stop_after=stop_after)
        if info["steps_done"] < int(params["train"]["steps"]):
            raise SystemExit(f"stopped after {info['steps_done']} steps (checkpoint in {ckpt}); rerun to resume")
        cls, _ = mdl.encode_images(m, arrays["train_images"][:1000], "vanilla")
        info["gap_cls_caption_train"] = modality_gap(cls, mdl.encode_text(m, tx["captions"][tx["train_caption"][:1000]]))
        with atomic_path(out) as tmp:
            tmp.mkdir(parents=True)
            save_weights(tmp / "model.safetensors", m)
            (tmp / "config.json").write_text(json.dumps({"vit": params["vit"], "text_dim": int(tx["captions"].shape[1])}))
        st.metrics = info
    return info


class EvalParams(TypedDict):
    seed: int
    method: dict[str, Any]
    holdout_frac: float
    n_boot: int


@stage(plan=plan.eval_params)
def evaluate(params: EvalParams, *, data: Path, text: Path, model: Path, out: Path) -> dict[str, Any]:
    """PVCL on the unlabelled train split, every arm and ablation on test, the held-out grid, diagnostics."""
    import numpy as np
    from safetensors.numpy import load_file

    from paperflow.core.checkpoint import load_weights
    from paperflow.core.seeding import stream
    from paperflow.piaa import evaluate as ev
    from paperflow.piaa import model as mdl
    from paperflow.piaa.data import load_prepared

    arrays, meta = load_prepared(data)
    tx = load_file(str(text))
    cfg = json.loads((Path(model) / "config.json").read_text())
    m = mdl.TinyCLIP(cfg["vit"], int(cfg["text_dim"]))
    load_weights(Path(model) / "model.safetensors", m)
    m.to(mdl.device()).eval()
    with Stage("piaa.evaluate", config=params, outputs=[out], inputs=[data, text, Path(model) / "model.safetensors"],
               seed=params["seed"]) as st:
        ntr = len(arrays["train_images"])
        perm = stream(params["seed"], "piaa-holdout").permutation(ntr)
        n_hold = max(1, int(round(params["holdout_frac"] * ntr)))
        hold, fit_idx = np.sort(perm[:n_hold]), np.sort(perm[n_hold:])
        t = mdl.encode_text(m, tx["prompts"])
        cls_test, van = mdl.encode_images(m, arrays["test_images"], "vanilla")
        _, scl = mdl.encode_images(m, arrays["test_images"], "sclip")
        _, clear = mdl.encode_images(m, arrays["test_images"], "clearclip")
        _, scl_fit = mdl.encode_images(m, arrays["train_images"][fit_idx], "sclip")  # unlabelled
        cls_hold, scl_hold = mdl.encode_images(m, arrays["train_images"][hold], "sclip")
        cls_hold, _ = mdl.encode_images(m, arrays["train_images"][hold], "vanilla")
        feats = {"text": t, "cls_test": cls_test, "van_test": van, "sclip_test": scl, "clear_test": clear,
                 "sclip_pvcl": scl_fit, "cls_holdout": cls_hold, "sclip_holdout": scl_hold,
                 "cap_test": mdl.encode_text(m, tx["captions"][tx["test_caption"]])}
        labels = {"test": arrays["test_labels"], "holdout": arrays["train_labels"][hold]}
        extra = {"area_test": arrays.get("test_area"), "owner_test": arrays.get("test_patch_owner"),
                 "ocls_test": arrays.get("test_object_class"), "images_test": arrays["test_images"]}
        res = ev.run(params, feats, labels, extra)
        res["n_test"] = int(len(arrays["test_labels"]))
        res["n_pvcl_images"] = int(len(fit_idx))
        res["n_holdout"] = int(len(hold))
        res["seed"] = params["seed"]
        res["classes"] = meta["classes"]
        write_json(out, res)
        st.metrics = {k: v["map"] for k, v in res["arms"].items()}
    return res


@stage()
def aggregate(inputs: list[Path], *, train: list[Path], out: Path) -> dict[str, Any]:
    """Collect the per-seed evaluations (and the training manifests) into metrics.json."""
    from paperflow.core.io import manifest_path
    from paperflow.piaa.report import collect

    runs = [read_json(p) for p in inputs]
    trains = [read_json(manifest_path(p))["metrics"] for p in train]
    with Stage("piaa.aggregate", config={"n": len(inputs)}, outputs=[out], inputs=inputs) as st:
        metrics = collect(runs, trains)
        write_json(out, metrics)
        st.metrics = {"seeds": metrics["seeds"]}
    return metrics


@stage()
def figures(*, metrics: Path, outdir: Path) -> list[Path]:
    """mAP by object-size tercile per arm, and the held-out temperature grid."""
    from paperflow.piaa.figures import FIGURES, make_all

    outs = [Path(outdir) / n for n in FIGURES]
    with Stage("piaa.figures", config={}, outputs=outs, inputs=[metrics]):
        return make_all(read_json(metrics), Path(outdir))


@stage()
def summary(params: dict[str, Any], *, metrics: Path, out: Path) -> None:
    """Write summary.md: claims, measured numbers, verdicts (params: the study's config section)."""
    from paperflow.piaa.report import write

    write(read_json(metrics), params, out, [str(metrics)])
