"""Method facts live with each method (methods/<name>.py); the plan and the schema read them from there."""

import pytest

from paperflow.core.config import load_config, load_schema
from paperflow.quantization import methods, plan


def test_schema_enum_is_the_method_registry():
    enum = load_schema()["properties"]["quantization"]["$defs"]["method"]["properties"]["quantizer"]["enum"]
    assert enum == methods.METHODS.names()


def test_method_defaults_and_facts_come_from_the_method_file():
    assert methods.resolve({"quantizer": "twla"}) == {"quantizer": "twla", "stage2": True, "gptq": True}
    assert methods.resolve({"quantizer": "twla", "gptq": False})["gptq"] is False
    assert methods.resolve({"quantizer": "rotation_only"}) == {"quantizer": "rotation_only", "rotation": "random",
                                                                "weights": "ternary"}
    with pytest.raises(ValueError, match="'rtn_w4' has no option 'stage2'"):
        methods.resolve({"quantizer": "rtn_w4", "stage2": False})
    assert methods.needs_kotms({"quantizer": "twla"}) and not methods.needs_kotms({"quantizer": "rtn_ternary"})
    assert methods.needs_kotms({"quantizer": "rotation_only", "rotation": "kotms"})
    assert not methods.needs_kotms({"quantizer": "rotation_only"})
    assert not methods.packs({"quantizer": "fp"}) and methods.packs({"quantizer": "rtn_w4"})


def test_plan_reads_method_and_activation_facts():
    cfg = load_config("config/config.yaml")
    q = cfg["quantization"]
    assert plan.qdir_inputs(cfg, "fp", 0) == []
    assert plan.qdir_inputs(cfg, "twla", 0) == [f"{cfg['models_dir']}/quantization/s0/twla"]
    assert "kotms" in plan.weights_inputs(cfg, "rot_kotms_ternary") and "kotms" not in plan.weights_inputs(cfg, "rtn_w4")
    mp0 = plan.eval_params(q, "twla", "a4mp_beta0", 0)
    assert mp0["ilaamp"]["beta"] == 0.0 and mp0["lac"] and mp0["bits"] is None
    assert plan.eval_params(q, "twla", "a4mp", 0)["ilaamp"]["beta"] == q["ilaamp"]["beta"]
    assert set(plan.eval_inputs(cfg, "twla", "a4lac", 1)) == {"model", "tokens", "qdir", "lac"}
    assert set(plan.eval_inputs(cfg, "fp", "a16", 1)) == {"model", "tokens"}
