"""The generated CLI of the fmri stages: every stage parses, and by-hand coordinates (`--config` +
`--cohort` / `--tag`) give the same job parameters as the rules' `--params` (plan.py)."""

import argparse
import json
from pathlib import Path

import pytest

from paperflow.core.cli import build_stage_parser, resolve_params, stages_of
from paperflow.core.config import load_config
from paperflow.fmri import plan, stages

TEST_CFG = Path(__file__).resolve().parents[2] / "config" / "test.yaml"
STAGES = ["geometry", "synth", "prep", "pretrain", "embed", "probe", "evaluate", "scaling", "report"]


@pytest.fixture(scope="module")
def cfg():
    return load_config(TEST_CFG)["fmri"]


def _parse(name, argv):
    info = stages_of(stages)[name]
    p = argparse.ArgumentParser()
    build_stage_parser(p, info)
    return info, p.parse_args(argv)


def test_every_stage_is_declared_in_order():
    assert list(stages_of(stages)) == STAGES


@pytest.mark.parametrize("name,coord,plan_fn", [("synth", ["--cohort", "state"], lambda c: plan.synth_params(c, "state")),
                                                 ("prep", ["--cohort", "pretrain"], lambda c: plan.prep_params(c, "pretrain")),
                                                 ("pretrain", ["--tag", "flat-n2-d0-s0"],
                                                  lambda c: plan.train_params(c, "flat-n2-d0-s0")),
                                                 ("embed", ["--tag", "flat-rand"], lambda c: plan.embed_params(c, "flat-rand")),
                                                 ("probe", ["--tag", "baselines"], lambda c: plan.probe_params(c, "baselines")),
                                                 ("report", [], plan.report_params)])
def test_config_and_coordinates_give_the_rules_params(name, coord, plan_fn, cfg):
    paths = {"synth": ["--geometry", "g", "--out", "o"], "prep": ["--synth", "s", "--geometry", "g", "--out", "o"],
             "pretrain": ["--geometry", "g", "--data", "d", "--out", "o"],
             "embed": ["--geometry", "g", "--state", "s", "--trait", "t", "--out", "o"],
             "probe": ["--state", "s", "--trait", "t", "--out", "o"],
             "report": ["--geometry", "g", "--metrics", "m", "--state", "s", "--summary", "x", "--figdir", "f",
                        "--pretrain", "a", "b"]}[name]
    info, ns = _parse(name, ["--config", str(TEST_CFG), *coord, *paths])
    by_hand = resolve_params(info, "fmri", ns)
    assert by_hand == json.loads(json.dumps(plan_fn(cfg)))
    info, ns = _parse(name, ["--params", json.dumps(plan_fn(cfg)), *paths])
    assert resolve_params(info, "fmri", ns) == by_hand
    if name == "report":
        assert ns.pretrain == [Path("a"), Path("b")] and ns.scaling is None and by_hand["claims"]["scaling"]["min_r2"] > 0


def test_job_priority_starts_the_longest_chain_first(cfg):
    """Scheduling only: pretraining cohort before the evaluation cohorts, main runs (volume > flat > parcel)
    before the scaling runs."""
    pr = plan.job_priority
    assert pr(cfg, "synth", cohort="pretrain") > pr(cfg, "synth", cohort="state") == pr(cfg, "synth", cohort="trait")
    assert pr(cfg, "prep", cohort="pretrain") > pr(cfg, "prep", cohort="trait")
    main = {sp: pr(cfg, "pretrain", tag=f"{sp}-s0") for sp in ("volume", "flat", "parcel")}
    assert main["volume"] > main["flat"] > main["parcel"] > max(pr(cfg, "pretrain", tag=t) for t in plan.scaling_tags(cfg))
