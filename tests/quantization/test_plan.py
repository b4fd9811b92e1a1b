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


def test_evaluation_groups_split_by_the_sweep_and_cover_every_run_once():
    """eval_jobs: group (default) = one job per (method, settings with the same inputs): `mp` settings wait for
    the ILA-AMP sweep, `a` settings do not; eval_jobs: run = one job per setting (paper scale)."""
    cfg = load_config("config/config.yaml")
    q = cfg["quantization"]
    groups = plan.eval_groups(q)
    assert groups[("twla", "a")] == ["a16", "a4", "a4lac"] and groups[("twla", "mp")] == ["a4mp", "a6mp"]
    assert sorted(f"{m}/{a}" for (m, _), acts in groups.items() for a in acts) == sorted(q["runs"])
    assert "sens" in plan.eval_group_inputs(cfg, "twla", "mp", 0) and "sens" not in plan.eval_group_inputs(cfg, "twla", "a", 0)
    assert plan.eval_group_inputs(cfg, "twla", "a", 0)["lac"].endswith("/s0/lac/twla.json")
    gp = plan.eval_group_params(q, "twla", "mp", 2)
    assert [r["act"] for r in gp["runs"]] == ["a4mp", "a6mp"] and gp["runs"][0] == plan.eval_params(q, "twla", "a4mp", 2)
    outs = plan.eval_group_outputs(cfg, "twla", "mp")
    assert [o.format(seed=2) for o in outs] == [plan.paths(cfg)["eval"].format(seed=2, method="twla", act=a) for a in ("a4mp", "a6mp")]
    single = plan.eval_groups({**q, "eval_jobs": "run"})
    assert len(single) == len(q["runs"]) and single[("twla", "a6mp")] == ["a6mp"]
    with pytest.raises(ValueError, match="no evaluation group"):
        plan.eval_group_params(q, "twla", "b", 0)
    paper = load_config("config/paper.yaml")["quantization"]
    assert paper["eval_jobs"] == "run"


def test_eval_group_refuses_outputs_that_do_not_match_its_settings(tmp_path):
    from paperflow.quantization import stages

    q = load_config("config/config.yaml")["quantization"]
    gp = plan.eval_group_params(q, "twla", "mp", 0)
    with pytest.raises(ValueError, match="2 settings but 1"):
        stages.evaluate_group(gp, model=tmp_path, tokens=tmp_path, out=[tmp_path / "a4mp.json"])
    with pytest.raises(ValueError, match="does not belong"):
        stages.evaluate_group(gp, model=tmp_path, tokens=tmp_path, out=[tmp_path / "a6mp.json", tmp_path / "a4mp.json"])


def test_job_priority_starts_the_sweep_and_the_twla_chain_first():
    """Scheduling only: KOTMS and the ILA-AMP sweep first, then the TWLA weights -> LAC chain, then the rest."""
    q = load_config("config/config.yaml")["quantization"]
    pr = plan.job_priority
    assert pr(q, "sens") == pr(q, "kotms") > pr(q, "weights", "twla") == pr(q, "lac", "twla") > pr(q, "eval", "twla", "mp")
    assert pr(q, "eval", "twla", "mp") > pr(q, "eval", "twla", "a") > pr(q, "weights", "rtn_w4") == pr(q, "eval", "fp", "a") == 0
