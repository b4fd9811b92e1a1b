"""Small configs shared by the video_bci unit tests (the schema's defaults, shrunk)."""

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
    return json.dumps(load_config(REPO / "config" / "config.yaml")["video_bci"])


def default_section() -> dict[str, Any]:
    """The validated tiny-default `video_bci:` section, a fresh copy."""
    return json.loads(_default_section())


def data_params(**kw: Any) -> dict[str, Any]:
    p = dict(default_section()["data"])
    p.update({"n_train": 200, "n_val": 40, "n_test": 300})
    p.update(kw)
    return p


def arm_params(**kw: Any) -> dict[str, Any]:
    sec = default_section()
    p = {"seed": 0, "chunk": 0, "arms": list(sec["arms"]), **sec["model"], **sec["rl"]}
    p.update({"d_model": 16, "heads": 2, "layers": 1, "group_size": 4, "items_per_update": 8, "updates": 4,
              "eval_every": 2})
    p.update(kw)
    return p


@pytest.fixture(scope="module")
def splits() -> dict[str, Any]:
    from paperflow.video_bci.data import SPLITS, make_split

    p = data_params()
    return {s: make_split(p, s, int(p[f"n_{s}"])) for s in SPLITS}
