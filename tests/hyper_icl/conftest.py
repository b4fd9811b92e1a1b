"""Small configs shared by the hyper_icl unit tests (the schema's defaults, shrunk)."""

from __future__ import annotations

import functools
import json

from pathlib import Path
from typing import Any

import pytest

from paperflow.core.config import load_config

REPO = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def _default_section() -> str:
    return json.dumps(load_config(REPO / "config" / "config.yaml")["hyper_icl"])


def default_section() -> dict[str, Any]:
    """The validated tiny-default `hyper_icl:` section (schema defaults + config/config.yaml), a fresh copy."""
    return json.loads(_default_section())


def small_data(seed: int = 0) -> dict[str, Any]:
    return {"seed": seed, "vis_dim": 32, "noise": 0.3, "n_demos": 4, "p_permuted": 0.5, "n_pretrain": 64,
            "n_pretrain_val": 16, "n_target_train": 48, "n_val": 12, "n_test": 20, "demo_draws": 3,
            "warm_colours": [0, 1, 2]}


def adapter_params(**kw: Any) -> dict[str, Any]:
    p = {"d_model": 64, "heads": 4, "layers": 3, "rank": 4, "gate_hidden": 2, "vkv_slots": 4,
         "shift_sites": ["residual", "attn_out"], "lora_rank": 2, "max_param_ratio": 2.0,
         "adapter_lr": 0.003, "adapter_batch": 16, "adapter_steps": 3, "lambda_ce": 1.0, "alpha": 1.0, "beta": 1.0,
         "kd_temperature": 2.0, "distill_layers": [1, 2, 3], "layer_weights": [], "curvature": 1.0,
         "map_scale": 0.125, "r_max_times_inv_sqrt_c": 4.0, "arcosh_eps": 1e-6}
    p.update(kw)
    return p


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    from paperflow.hyper_icl.data import write_world

    out = tmp_path_factory.mktemp("hyper_icl") / "episodes"
    write_world(out, small_data())
    return out
