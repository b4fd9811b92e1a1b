"""Planning: which jobs a config asks for and exactly which parameters each depends on. Rules and the CLI
call these, so they cannot disagree. Paths are relative to the data / models / results roots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# claims compare these arms (an arm missing from the config makes its claim "not testable")
CLAIM_ARMS = ("A", "C", "E", "D", "F", "A_filler", "C_filler")
# train: training; val: held out from the training images, model selection only (bench/expalign_select.py);
# test: the reported numbers
SPLITS = ("train", "val", "test")


def arms(cfg: Mapping[str, Any]) -> list[str]:
    return list(cfg["arms"])


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return [int(s) for s in cfg["seeds"]]


def name(cfg: Mapping[str, Any]) -> str:
    return str(cfg["data"]["name"])


def synthetic(cfg: Mapping[str, Any]) -> bool:
    return cfg["data"]["source"] == "synthetic"


def raw_paths(cfg: Mapping[str, Any], data_dir: str) -> dict[str, str]:
    """Annotation files and image sources the prep stage reads (generated ones for synthetic data)."""
    d = cfg["data"]
    if synthetic(cfg):
        raw = f"{data_dir}/expalign/{name(cfg)}/raw"
        return {f"{s}_{k}": f"{raw}/{f}_{s}.{e}" for s in SPLITS
                for k, f, e in (("json", "annotations", "json"), ("images", "images", "npy"))}
    keys = [f"{s}_{k}" for s in SPLITS for k in ("json", "images")]
    missing = [k for k in keys if not d.get(k)]
    if missing:
        raise ValueError(f"expalign.data: source {d['source']!r} needs {missing}")
    return {k: str(d[k]) for k in keys}


def synth_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {**dict(cfg["synthetic"]), "image_size": int(cfg["data"]["image_size"])}


def prep_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    d = cfg["data"]
    return {"source": d["source"], "image_size": int(d["image_size"]),
            "max_train_images": d["max_train_images"], "max_val_images": d["max_val_images"],
            "max_test_images": d["max_test_images"]}


def text_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"styles": dict(cfg["text"]["styles"])}


def arm_cfg(cfg: Mapping[str, Any], arm: str) -> dict[str, Any]:
    if arm not in cfg["arms"]:
        raise ValueError(f"unknown expalign arm {arm!r}; configured: {sorted(cfg['arms'])}")
    a = dict(cfg["arms"][arm])
    if a["prompt"] not in cfg["text"]["styles"]:
        raise ValueError(f"expalign arm {arm!r}: prompt style {a['prompt']!r} is not in text.styles")
    return a


def train_params(cfg: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Everything one training job depends on — and nothing else."""
    model = {**dict(cfg["model"]), "image_size": int(cfg["data"]["image_size"])}  # the ViT needs the input size
    return {"arm_name": arm, "arm": arm_cfg(cfg, arm), "seed": int(seed), "model": model, "train": dict(cfg["train"])}


def eval_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One evaluation job per seed scores every arm's model of that seed."""
    return {"seed": int(seed), "arms": {a: train_params(cfg, a, seed) for a in arms(cfg)}, "eval": dict(cfg["eval"])}


def model_path(models_dir: str, cfg: Mapping[str, Any], arm: str, seed: int) -> str:
    return f"{models_dir}/expalign/{name(cfg)}/{arm}/s{seed}/model.safetensors"


def model_paths(models_dir: str, cfg: Mapping[str, Any], seed: int) -> list[str]:
    return [model_path(models_dir, cfg, a, seed) for a in arms(cfg)]


def eval_path(results_dir: str, cfg: Mapping[str, Any], seed: int) -> str:
    return f"{results_dir}/expalign/runs/{name(cfg)}/s{seed}.json"


def eval_paths(results_dir: str, cfg: Mapping[str, Any]) -> list[str]:
    return [eval_path(results_dir, cfg, s) for s in seeds(cfg)]
