"""The video_bci part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import pytest

pytestmark = pytest.mark.workflow

ARMS = {"majority", "direct", "racc", "dus", "dus_bonus", "pts", "dus_pts", "resampled", "entropy_weighted"}


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/video_bci"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 7
    assert all(c["verdict"] == "not testable at this scale" for c in claims)  # one seed never decides
    text = (res / "summary.md").read_text()
    assert "reconstruction" in text and "by construction" in text and "± 0.000" not in text
    assert (res / "figures/minority_recovery_by_arm.png").stat().st_size > 1000


def test_every_arm_evaluated_on_the_same_items(smk_run):
    m = json.loads((smk_run / "results/video_bci/metrics.json").read_text())
    assert set(m["arms"]) == ARMS and m["backend"] == "grpo_lite"
    for arm, r in m["arms"].items():
        s0 = r["seeds"]["0"]
        assert len(s0["correct"]) == m["n_test"] == 48 and 0 <= s0["acc"] <= 1
        assert (len(s0["curve"]) > 0) == (arm != "majority")
    assert m["arms"]["majority"]["seeds"]["0"]["minority_recovery"] == 0.0
    schema = json.loads((smk_run / "data/video_bci/items/schema.json").read_text())
    assert schema["splits"]["test"]["n"] == 48 and "prior_trace" in schema["keys"]
    assert len(m["subsets"]["minority"]) == 48 and sum(m["subsets"]["minority"]) == m["arms"]["racc"]["seeds"]["0"]["n"]["minority"]


def test_checkpoints_removed_after_the_arms_jobs(smk_run):
    ck = smk_run / "models/video_bci/ckpt"
    assert not ck.exists() or not any(ck.iterdir())
