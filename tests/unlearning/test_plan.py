"""Planning of the fused sample + judge jobs (eval.jobs: seed vs model)."""
from pathlib import Path

import pytest

from paperflow.core.config import load_config
from paperflow.unlearning import plan

REPO = Path(__file__).resolve().parents[2]


def test_one_job_per_seed_plans_what_one_job_per_model_plans():
    """The tiny default groups every model of a seed into one job; each model keeps exactly the sampling
    parameters (its samples' manifest) and judging parameters of a per-model job."""
    cfg = load_config(REPO / "config" / "config.yaml")["unlearning"]
    assert cfg["eval"]["jobs"] == "seed"
    for seed in cfg["seeds"]:
        group = plan.sample_group(cfg, seed)
        assert group["models"] == plan.model_names(cfg) and group["seed"] == seed
        for m in group["models"]:
            one = plan.sample_group(cfg, seed, m)
            assert one["models"] == [m]
            assert one["sample"][m] == group["sample"][m] == plan.sample_params(cfg, m, seed)
            assert one["judge"] == group["judge"] == plan.judge_params(cfg)


def test_paper_scale_keeps_a_sampling_and_a_judging_job_per_model():
    paper = load_config(REPO / "config" / "paper.yaml", {"unlearning.enabled": True})["unlearning"]
    assert paper["eval"]["jobs"] == "model" and paper["unlearn"]["jobs"] == "model"


def test_one_training_job_per_seed_plans_what_the_per_model_jobs_plan():
    """`unlearn.jobs: seed` trains every unlearned, RULE and control model of a seed in one job; each model
    keeps exactly the parameters of its per-model job, and the granularity itself is in no model's."""
    cfg = load_config(REPO / "config" / "config.yaml")["unlearning"]
    assert cfg["unlearn"]["jobs"] == "seed"
    per_model = load_config(REPO / "config" / "config.yaml", {"unlearning.unlearn.jobs": "model"})["unlearning"]
    for seed in cfg["seeds"]:
        group = plan.train_group(cfg, seed)
        assert list(group["unlearn"]) + list(group["rule"]) == plan.train_models(cfg)
        assert set(plan.train_models(cfg)) == set(plan.model_names(cfg)) - set(plan.REFERENCE_MODELS)
        for m, p in group["unlearn"].items():
            assert p == plan.unlearn_params(per_model, m, seed) and "jobs" not in p["unlearn"]
        for name, p in group["rule"].items():
            kind, base = name.split("_", 1)
            assert p == plan.rule_params(per_model, kind, base, seed) and base in group["unlearn"]


def test_the_train_stage_runs_each_model_with_its_own_parameters_and_base(monkeypatch, tmp_path):
    from paperflow.unlearning import stages

    cfg = load_config(REPO / "config" / "config.yaml")["unlearning"]
    group = plan.train_group(cfg, 1)
    calls = []
    monkeypatch.setattr(stages, "unlearn", lambda p, **kw: calls.append(("unlearn", p, kw)) or {"m": p["method"]})
    monkeypatch.setattr(stages, "rule", lambda p, **kw: calls.append(("rule", p, kw)) or {"m": p["kind"]})
    names = plan.train_models(cfg)
    out = [tmp_path / n for n in names]
    shuffled = out[::-2] + out[-2::-2]  # Snakemake passes an unnamed output list in its own order
    assert sorted(shuffled) == sorted(out) and shuffled != out
    res = stages.train(group, data=tmp_path / "d", full=tmp_path / "f", retain=tmp_path / "r", out=shuffled)
    assert list(res) == names and [c[1] for c in calls] == [*group["unlearn"].values(), *group["rule"].values()]
    for (what, p, kw), o in zip(calls, out):
        assert kw["out"] == o and o.name == (p["method"] if what == "unlearn" else f"{p['kind']}_{p['base']}")
        if what == "rule":  # on top of this job's own model of its base method
            assert kw["base"] == tmp_path / p["base"] and p["base"] in group["unlearn"]
        else:
            assert kw["full"] == tmp_path / "f" and kw["retain"] == tmp_path / "r"
    for bad in (out[:-1], out[:-1] + [tmp_path / "x" / names[0]], out[:-1] + [tmp_path / "other"]):
        with pytest.raises(SystemExit, match="--out"):
            stages.train(group, data=tmp_path, full=tmp_path, retain=tmp_path, out=bad)


def _merged(*names: str) -> dict:
    """The validated config of `--configfile a.yaml b.yaml ...` (Snakemake's recursive update)."""
    import yaml
    from snakemake.utils import update_config

    from paperflow.core.config import validate_config

    cfg: dict = {}
    for n in names:
        update_config(cfg, yaml.safe_load((REPO / "config" / n).read_text()))
    return validate_config(cfg, " + ".join(names))


def test_tiny_default_methods_are_the_schema_methods_but_rmu_layer():
    """config.yaml lists the methods only to move RMU's layer into the 2-layer model; every other
    hyperparameter must stay the schema's (one source of truth)."""
    from paperflow.core.config import validate_config

    schema_methods = validate_config({"unlearning": {"enabled": True}})["unlearning"]["methods"]
    cfg = _merged("config.yaml")["unlearning"]
    assert cfg["model"]["num_layers"] == 2 and cfg["finetune"]["batch_size"] == 16
    assert set(cfg["methods"]) == set(schema_methods)
    for name, entry in cfg["methods"].items():
        diff = {k for k in entry if entry[k] != schema_methods[name][k]}
        assert diff == ({"layer"} if name == "rmu" else set()), name
    assert cfg["methods"]["rmu"]["layer"] < cfg["model"]["num_layers"]


def test_spec_overlay_restores_the_spec_sizes():
    from paperflow.core.config import validate_config

    schema = validate_config({"unlearning": {"enabled": True}})["unlearning"]
    cfg = _merged("config.yaml", "unlearning_spec.yaml")["unlearning"]
    assert cfg["model"] == schema["model"] and cfg["model"]["num_layers"] == 4
    assert cfg["finetune"]["batch_size"] == schema["finetune"]["batch_size"] == 32
    assert cfg["methods"] == schema["methods"]  # RMU back on layer 2 of 4, the rest untouched
    assert cfg["seeds"] == [0, 1, 2] and cfg["finetune"]["per_seed"]
