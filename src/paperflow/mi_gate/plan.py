"""Planning: which jobs the `mi_gate:` config asks for and exactly which parameters each depends on.
Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ORIGINAL = "original"
ALL_SEEDS = "all"


def variants(cfg: Mapping[str, Any]) -> list[str]:
    """'original', then '<arm>_t<τ>' for every arm × τ."""
    return [ORIGINAL] + [f"{a}_t{float(t):g}" for a in cfg["arms"] for t in cfg["taus"]]


def parse_variant(variant: str) -> tuple[str, float | None]:
    """'gated_t0.25' → ('gated', 0.25); 'original' → ('original', None)."""
    if variant == ORIGINAL:
        return ORIGINAL, None
    arm, t = variant.rsplit("_t", 1)
    return arm, float(t)


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def seedsets(cfg: Mapping[str, Any]) -> list[str]:
    """'all' (every seed in one job: each job pays torch start-up) or 's0', 's1', ... (one job per seed)."""
    return [ALL_SEEDS] if cfg["jobs"]["group_seeds"] else [f"s{s}" for s in seeds(cfg)]


def seed_list(cfg: Mapping[str, Any], seedset: str) -> list[int]:
    if seedset == ALL_SEEDS:
        return seeds(cfg)
    if not seedset.startswith("s"):
        raise ValueError(f"seedset {seedset!r}: expected 'all' or 's<k>'")
    return [int(seedset[1:])]


def runs(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(v, s) for v in variants(cfg) for s in seedsets(cfg)]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["data"]["synthetic"])


def inputs(cfg: Mapping[str, Any], synth_dir: str) -> dict[str, str]:
    """The data.json and feature array every stage reads: the data stage's, or staged files."""
    d = cfg["data"]
    if d["source"] == "synthetic":
        return {"data_json": f"{synth_dir}/data.json", "images": f"{synth_dir}/image_features.npy"}
    return {"data_json": d["files"]["data_json"], "images": d["files"]["image_features"]}


def gate_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"taus": [float(t) for t in cfg["taus"]], "text": dict(cfg["text"]), "captioner": dict(cfg["captioner"]),
            "estimator": dict(cfg["estimator"])}


def train_params(cfg: Mapping[str, Any], variant: str, seedset: str) -> dict[str, Any]:
    """Everything one (arm, τ) job depends on — and nothing else (the gate's output is an input file)."""
    arm, tau = parse_variant(variant)
    ev = dict(cfg["eval"])
    p = {"variant": variant, "arm": arm, "tau": tau, "seeds": seed_list(cfg, seedset), "text": dict(cfg["text"]),
         "estimator": dict(cfg["estimator"]), "model": dict(cfg["model"]), "eval": ev,
         "random_words": list(cfg["random_words"]) if arm == "words" else []}
    if cfg["model"].get("kind") == "vlm":  # only then: the late-fusion jobs keep their parameters (and hashes)
        p["vlm"] = vlm_params(cfg)
        p["random_words"] = list(cfg["random_words"])  # the tiny VLM's vocabulary has every word
    return p


def vlm_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """model.kind vlm: the VLM, LoRA and SFT settings, read from full_scale (their one place in the config)."""
    f = cfg["full_scale"]
    lo, s = dict(f["lora"]), dict(f["sft"])
    files = cfg.get("data", {}).get("files", {})
    image_dir = files.get("image_dir") if cfg.get("data", {}).get("source") == "files" else None
    return {"path": f["vlm"] or None, "max_caption_tokens": int(f["caption_max_new_tokens"]),
            "image_dir": image_dir or None, "image_size": int(f["image_size"]),
            "question": f["question"], "caption_prompt": f["caption_prompt"],
            "tiny_hidden": int(f["tiny_hidden"]), "tiny_layers": int(f["tiny_layers"]),
            "lora": {"r": int(lo["r"]), "alpha": int(lo["alpha"]), "dropout": float(lo["dropout"]),
                     "target_modules": list(lo["targets"])},
            "sft": {"epochs": float(s["epochs"]), "lr": float(s["lr"]), "warmup_ratio": float(s["warmup"]),
                    "batch_size": int(s["effective_batch"])}}
