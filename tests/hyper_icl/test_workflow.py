"""The hyper_icl part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import pytest

pytestmark = pytest.mark.workflow

ARMS = {"zero_shot", "teacher", "shift", "vkv", "logit_fixed", "logit_gated", "gated_euclid", "gated_lorentz", "lora",
        "gated_lorentz_noce", "gated_noteacher"}


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/hyper_icl"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 7
    # one seed (the smoke config) can never decide a claim
    assert all(c["verdict"] == "not testable at this scale" for c in claims)
    text = (res / "summary.md").read_text()
    assert "reconstruction" in text and "by construction" in text and "± 0.000" not in text
    assert (res / "figures/accuracy_by_arm.png").stat().st_size > 1000


def test_every_arm_on_both_targets_paired(smk_run):
    m = json.loads((smk_run / "results/hyper_icl/metrics.json").read_text())
    assert set(m["targets"]) == {"T1", "T2"}
    for t, d in m["targets"].items():
        assert set(d["arms"]) == ARMS
        for arm, r in d["arms"].items():
            s0 = r["seeds"]["0"]
            assert len(s0["correct"]) == m["n_test"] == 16 and 0 <= s0["acc"] <= 1
            assert (s0["n_params"] > 0) == (arm not in ("zero_shot", "teacher"))
        assert d["arms"]["teacher"]["seeds"]["0"]["tokens_per_query"] > d["arms"]["lora"]["seeds"]["0"]["tokens_per_query"]
    assert len(m["base"]["0"]["all"]) == 5  # ICL curve k = 0..4
    assert not (smk_run / "models/hyper_icl/s0/ckpt").exists()
    assert (smk_run / "models/hyper_icl/s0/base.safetensors").exists()
