"""Planning for `piaa`: which jobs a config asks for and exactly which parameters each depends on
(rules and the CLI call the same functions, so they cannot disagree)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def synthetic(cfg: Mapping[str, Any]) -> bool:
    return cfg["data"]["source"] == "synthetic"


def generate_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The synthetic generator's parameters (data seed fixed by the config, independent of model seeds)."""
    d, s = cfg["data"], cfg["data"]["synthetic"]
    return {"seed": int(s["seed"]), "n_train": int(s["n_train"]), "n_test": int(s["n_test"]),
            "image_size": int(d["image_size"]), "patch_size": int(cfg["vit"]["patch_size"]),
            "max_objects": int(s["max_objects"]), "max_area_patches": int(s["max_area_patches"]),
            "area_alpha": float(s["area_alpha"]), "context_corr": float(s["context_corr"])}


def prepare_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    d = cfg["data"]
    p = {"name": d["name"], "source": d["source"], "image_size": int(d["image_size"]),
         "patch_size": int(cfg["vit"]["patch_size"]), "image_ext": d["image_ext"],
         "max_objects": int(d["synthetic"]["max_objects"])}
    if synthetic(cfg):
        p["source_size"] = int(d["image_size"])
    else:
        p.update({k: d[k] for k in ("img_root", "train_list", "test_list", "classes_file")})
        p["objects"] = d.get("objects")
    return p


def text_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"encoder": cfg["text"]["encoder"], "hash_dim": int(cfg["text"]["hash_dim"]),
            "template": cfg["text"]["template"]}


def train_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    return {"seed": int(seed), "vit": {**cfg["vit"], "image_size": int(cfg["data"]["image_size"])},
            "train": dict(cfg["train"])}


def eval_params(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    return {"seed": int(seed), "method": dict(cfg["method"]), "holdout_frac": float(cfg["holdout_frac"]),
            "n_boot": int(cfg["n_boot"])}


def data_dir(cfg: Mapping[str, Any], root: str) -> str:
    return f"{root}/piaa/{cfg['data']['name']}"
