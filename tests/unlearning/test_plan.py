"""Planning of the fused sample + judge jobs (eval.jobs: seed vs model)."""
from pathlib import Path

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
    assert paper["eval"]["jobs"] == "model"
