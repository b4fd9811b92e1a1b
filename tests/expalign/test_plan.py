"""Planning: a job's parameters are exactly what it depends on."""

from __future__ import annotations

import copy

import pytest

from paperflow.core.config import validate_config
from paperflow.expalign import plan


def _cfg(**over):
    return validate_config({"expalign": {"enabled": True, **over}})["expalign"]


def test_changing_one_arm_changes_only_its_training_jobs():
    cfg = _cfg()
    assert plan.arms(cfg)[:3] == ["A", "B", "C"] and plan.seeds(cfg) == [0, 1, 2]
    edited = copy.deepcopy(cfg)
    edited["arms"]["F"]["rho"] = 0.05
    changed = [a for a in plan.arms(cfg) if plan.train_params(cfg, a, 0) != plan.train_params(edited, a, 0)]
    assert changed == ["F"]
    assert plan.eval_params(cfg, 0) != plan.eval_params(edited, 0)  # evaluation of that seed reruns
    p = plan.train_params(cfg, "D", 1)
    assert p["arm"] == {"head": "expect", "pooling": "topk", "rho": 0.01, "gaco": True, "detach_advantage": False,
                        "box": False, "prompt": "plain"} and p["seed"] == 1


def test_bad_arm_and_missing_real_paths_are_named():
    cfg = _cfg(arms={"X": {"head": "expect", "prompt": "shouting"}})
    with pytest.raises(ValueError, match="prompt style 'shouting'"):
        plan.train_params(cfg, "X", 0)
    with pytest.raises(ValueError, match="unknown expalign arm 'Y'"):
        plan.train_params(cfg, "Y", 0)
    lv = _cfg(data={"source": "lvis", "train_json": "a.json"})
    with pytest.raises(ValueError, match="needs .*train_images"):
        plan.raw_paths(lv, "data")
