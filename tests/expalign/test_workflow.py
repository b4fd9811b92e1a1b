"""The expalign part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.workflow


def test_outputs_manifests_and_claims(smk_run):
    res = smk_run / "results/expalign"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 7
    assert {c["verdict"] for c in claims} <= {"held", "did not hold", "partly", "not testable at this scale",
                                              "inconclusive"}
    # one seed can never support a verdict
    assert all(c["verdict"] == "not testable at this scale" for c in claims)
    text = (res / "summary.md").read_text()
    assert "not long-tail detection at LVIS scale" in text and "± 0.000" not in text
    m = json.loads((res / "metrics.json").read_text())
    assert set(m["arms"]) == {"A", "C", "D"} and m["seeds"] == [0]
    assert m["rare_positive_in_train"] == []
    for arm in m["arms"].values():
        for split in ("seen", "rare"):
            assert 0.0 <= arm["pointing"][split][0] <= 1.0
            assert 0.0 < arm["pointing_chance"][split][0] < 1.0
    for f in ("heatmaps.png", "metrics_by_arm.png"):
        assert (res / "figures" / f).stat().st_size > 1000


def test_text_cache_and_training_manifests(smk_run):
    from safetensors.numpy import load_file

    d = smk_run / "data/expalign/synth"
    t = load_file(str(d / "text.safetensors"))
    P = len(json.loads((d / "meta.json").read_text())["phrases"])
    assert t["plain.tokens"].shape[:2] == t["plain.mask"].shape and t["plain.tokens"].shape[0] == P
    assert t["filler.mask"].sum() > t["plain.mask"].sum()  # filler prompts are longer
    assert (t["plain.tokens"][t["plain.mask"] == 0] == 0).all()  # padding rows are exactly zero
    man = json.loads((smk_run / "models/expalign/synth/D/s0/model.safetensors.manifest.json").read_text())
    assert man["config"]["arm"]["gaco"] is True and man["metrics"]["steps"] == man["config"]["train"]["steps"]
    assert not list((smk_run / "models/expalign/synth/D/s0").glob("ckpt-*"))  # checkpoints removed when done
