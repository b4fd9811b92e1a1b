"""Shared fixtures for the robotics tests: a tiny simulator raw tree in the Bridge V2 layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperflow.robotics.simdata import generate


def sim_params(**over):
    p = {"seed": 3, "n_sessions": 2, "episodes_per_session": 2, "max_steps": 8, "legacy_fraction": 0.0,
         "legacy_policy_out_fraction": 0.0, "permute_topics": False, "folder_order": None,
         "render": {"width": 48, "height": 36, "views": [0, 1, 2], "distractor_strength": 1.0}}
    for k, v in over.items():
        p[k] = v
    return p


def make_tree(root: Path, **over) -> Path:
    raw = root / "raw"
    generate(raw, sim_params(**over))
    return raw


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path)
