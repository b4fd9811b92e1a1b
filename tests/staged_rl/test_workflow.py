"""The staged_rl part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import pytest

pytestmark = pytest.mark.workflow

ARMS = {"base", "merged", "p_t_v", "t_p_v", "v_t_p", "v_only", "pu_t_v", "capsft_t_v"}


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/staged_rl"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 8
    assert all(c["verdict"] == "not testable at this scale" for c in claims)  # one seed never decides
    text = (res / "summary.md").read_text()
    assert "[recon]" in text and "proxy" in text and "± 0.000" not in text
    assert (res / "figures/accuracy_by_arm_and_stage.png").stat().st_size > 1000


def test_every_arm_evaluated_after_every_stage(smk_run):
    m = json.loads((smk_run / "results/staged_rl/metrics.json").read_text())
    assert set(m["arms"]) == ARMS and m["backend"] == "grpo_lite"
    n_stages = {"base": 1, "merged": 3, "v_only": 1}
    for arm, r in m["arms"].items():
        st = r["seeds"]["0"]["stages"]
        assert len(st) == n_stages.get(arm, 3), arm
        for s in st:
            assert set(s["eval"]) == {"perc", "text", "vis"} and len(s["eval"]["vis"]["correct"]) == m["n_test"] == 16
    assert [s["stage"] for s in m["arms"]["capsft_t_v"]["seeds"]["0"]["stages"]] == ["capsft", "text", "vis"]
    assert not (smk_run / "models/staged_rl/s0/ckpt").exists()
    assert not (smk_run / "models/staged_rl/s0/arms_c0_ckpt").exists()  # the arms job's state, once it is done
    assert (smk_run / "models/staged_rl/s0/base.safetensors").exists()
    schema = smk_run / "data/staged_rl/world/world.json"
    assert json.loads(schema.read_text())["sizes"]["test_vis"] == 16
