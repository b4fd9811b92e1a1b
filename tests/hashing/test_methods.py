"""The method registry: one module per method, the schema enum and the planner read it."""

from __future__ import annotations

import pkgutil

import pytest

from paperflow.core.config import ConfigError, load_schema, validate_config
from paperflow.hashing import methods, plan
from paperflow.hashing.methods import METHODS


def test_every_module_registers_one_method_and_the_schema_enum_is_the_module_list():
    modules = sorted(m.name for m in pkgutil.iter_modules(methods.__path__) if not m.name.startswith("_"))
    assert METHODS.names() == modules == ["label_smooth", "plain", "rfcmh", "rfcmh_paper", "small_loss"]
    enum = load_schema()["properties"]["hashing"]["properties"]["grid"]["properties"]["methods"]["items"]["enum"]
    assert enum == modules
    with pytest.raises(ConfigError):
        validate_config({"hashing": {"enabled": True, "grid": {"methods": ["no_such_method"]}}})


def test_method_params_are_exactly_the_declared_config_keys():
    cfg = validate_config({"hashing": {"enabled": True, "rfcmh": {"alpha": 0.5},
                                       "train": {"weight_decay_paper": 3e-4}}})["hashing"]
    for name in METHODS:
        p = plan.train_params(cfg, "synth", name, 16, "sym", "0.4", 10)["method_params"]
        assert set(p) == set(METHODS[name].config_keys)
    assert plan.train_params(cfg, "synth", "rfcmh", 16, "sym", "0", 10)["method_params"]["alpha"] == 0.5
    assert plan.train_params(cfg, "synth", "rfcmh_paper", 16, "sym", "0", 10)["method_params"]["weight_decay"] == 3e-4
    assert plan.train_params(cfg, "synth", "plain", 16, "sym", "0", 10)["method_params"]["weight_decay"] == 0.0
    ls = METHODS["label_smooth"]
    assert ls.grid(ls.params(cfg)) == [{"eps": e} for e in cfg["baselines"]["label_smooth_eps"]]
    assert METHODS["plain"].grid(METHODS["plain"].params(cfg)) == [{}]


def test_restricted_method_runs_only_where_declared():
    cfg = validate_config({"hashing": {"enabled": True, "grid": {"bits": [16, 64], "paper_variant_bits": [64]}}})["hashing"]
    runs = plan.runs(cfg)
    assert {r["bits"] for r in runs if r["method"] == "rfcmh_paper"} == {64}
    assert {r["mode"] for r in runs if r["method"] == "rfcmh_paper"} == {"sym"}
    assert {r["bits"] for r in runs if r["method"] == "plain"} == {16, 64}
    assert {m: METHODS[m].role for m in METHODS}["rfcmh"] == "proposed"
    assert all(not METHODS[m].extra_inputs for m in METHODS)  # no method needs inputs beyond the shared ones
