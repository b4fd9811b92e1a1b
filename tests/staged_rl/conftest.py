"""Small configs shared by the staged_rl unit tests (the schema's defaults, shrunk)."""

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
    return json.dumps(load_config(REPO / "config" / "config.yaml")["staged_rl"])


def default_section() -> dict[str, Any]:
    """The validated tiny-default `staged_rl:` section (schema defaults + config/config.yaml), a fresh copy."""
    return json.loads(_default_section())


def small_data(seed: int = 0) -> dict[str, Any]:
    return {**default_section()["data"], "seed": seed, "n_warmup": 200, "n_perc_pool": 60, "n_text": 30, "n_vis": 30,
            "n_describe": 30, "n_test": 20}


def small_params(**kw: Any) -> dict[str, Any]:
    """Arms/base parameters (plan.arms_params + plan.base_params of the default, shrunk)."""
    from paperflow.staged_rl import plan

    cfg = default_section()
    cfg["model"] = {"d_model": 16, "heads": 2, "layers": 1}
    p = {**plan.base_params(cfg, 0), **plan.arms_params(cfg, 0, 0)}
    p.update({"warmup_steps": 6, "warmup_batch": 16, "ckpt_every": 3, "group_size": 2, "prompts_per_update": 4,
              "split": [1, 2, 2]})
    p.update(kw)
    return p


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    from paperflow.staged_rl.data import write_world

    out = tmp_path_factory.mktemp("staged_rl") / "world"
    write_world(out, small_data())
    return out
