"""Stable locations of the unlearning study's outputs (a function of the config only).

The public path API other studies read unlearning results through (the quantization study's
cross-study stages do). Each function returns exactly the path a rule in `rules/unlearning.smk`
writes; `tests/quantization/test_cross_paths.py` checks them against a real run. This module imports
nothing from the unlearning package: change it together with the rules, never apart.

`config` is the whole validated config (it needs `data_dir`, `models_dir`, `results_dir` and the
`unlearning` section).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the reference models every run trains: the original (`full`) and the retrain (`retain`)
REFERENCE_MODELS = ("full", "retain")


def _u(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return config["unlearning"]


def run_name(config: Mapping[str, Any]) -> str:
    return str(_u(config)["run_name"])


def data_dir(config: Mapping[str, Any]) -> str:
    """`{data_dir}/unlearning/{run}/tofu`: TOFU-format splits ({split}.json) + manifest.json."""
    return f"{config['data_dir']}/unlearning/{run_name(config)}/tofu"


def models_root(config: Mapping[str, Any]) -> str:
    """`{models_dir}/unlearning/{run}`: parent of `seed{s}/{model}/` and `tokenizer/`."""
    return f"{config['models_dir']}/unlearning/{run_name(config)}"


def results_root(config: Mapping[str, Any]) -> str:
    """`{results_dir}/unlearning/{run}`."""
    return f"{config['results_dir']}/unlearning/{run_name(config)}"


def tokenizer_dir(config: Mapping[str, Any]) -> str | None:
    """The tiny tier's trained tokenizer dir (`{models_root}/tokenizer`); None for a pretrained model
    (its tokenizer files sit in every model dir)."""
    return f"{models_root(config)}/tokenizer" if _u(config)["model"]["kind"] == "tiny" else None


def model_seed(config: Mapping[str, Any], model: str, seed: int) -> int:
    """The seed directory holding `model` for run seed `seed`: the reference models are trained once
    at `seeds[0]` and shared, unless `finetune.per_seed`."""
    u = _u(config)
    if model in REFERENCE_MODELS and not u["finetune"]["per_seed"]:
        return int(u["seeds"][0])
    return int(seed)


def model_dir(config: Mapping[str, Any], model: str, seed: int) -> str:
    """`{models_root}/seed{s'}/{model}`: a save_pretrained dir (safetensors + tokenizer files) with its
    manifest `<dir>.manifest.json`. `model`: full, retain, a method name, rule_<base>, control_<base>."""
    return f"{models_root(config)}/seed{model_seed(config, model, seed)}/{model}"


def samples_path(config: Mapping[str, Any], model: str, seed: int) -> str:
    """`{results_root}/samples/seed{s}/{model}.jsonl`: greedy + sampled responses; its manifest's
    `config` holds the sampling parameters."""
    return f"{results_root(config)}/samples/seed{int(seed)}/{model}.jsonl"


def metrics_path(config: Mapping[str, Any], model: str, seed: int) -> str:
    """`{results_root}/metrics/seed{s}/{model}.json`: judged metrics, `leak[decoder][judge]` with
    `n`, `leak[k]`, `ci[k]` and the per-prompt counts `c`; its manifest's `config` holds the judge
    parameters."""
    return f"{results_root(config)}/metrics/seed{int(seed)}/{model}.json"


def report_paths(config: Mapping[str, Any]) -> dict[str, str]:
    """The study's final outputs: summary.md, metrics.json, leak_curves.png, table.md."""
    r = results_root(config)
    return {"summary": f"{r}/summary.md", "metrics": f"{r}/metrics.json",
            "leak_curves": f"{r}/leak_curves.png", "table": f"{r}/table.md"}
