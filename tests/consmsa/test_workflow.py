"""The consmsa part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import pytest

pytestmark = pytest.mark.workflow


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/consmsa"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 7
    # one training seed (the smoke config) can never decide a claim
    assert all(c["verdict"] == "not testable at this scale" for c in claims)
    text = (res / "summary.md").read_text()
    assert "reconstruction" in text and "by construction" in text
    assert (res / "figures" / "pruning_curve.png").stat().st_size > 1000


def test_variants_controls_and_probes(smk_run):
    m = json.loads((smk_run / "results/consmsa/metrics.json").read_text())
    assert set(m["variants"]) == {"base", "full_k1", "full_k0.2", "intra_k0.2"}
    ref = m["variants"]["full_k1"]["seeds"]["0"]
    assert set(ref["controls"]) == {f"{c}@0.2" for c in ("random", "norm", "cls_attn", "relevance", "i2cs", "full")}
    for c in ref["controls"].values():
        assert len(c["abs_err"]) == 24 and 0.0 <= c["kept_precision"] <= 1.0
    test = m["variants"]["full_k0.2"]["seeds"]["0"]["splits"]["test"]
    assert 0.0 <= test["kept_precision"] <= 1.0 and 0.0 <= test["auroc_conflict"] <= 1.0
    assert {"mae", "corr", "acc2_has0", "f1_has0", "acc2_non0", "f1_non0", "acc7"} <= set(test)
    # the models are written, the resumable state is gone
    assert (smk_run / "models/consmsa/g0_s0/full_k1/model.safetensors").exists()
    assert not (smk_run / "models/consmsa/ckpt/g0_s0").exists()
