"""Workflow: the mpdpac outputs of the shared config/test.yaml run (`smk_run`)."""

from __future__ import annotations

import json

import pytest

from paperflow.mpdpac import plan

VERDICTS = {"held", "did not hold", "partly", "not testable at this scale", "inconclusive"}


@pytest.mark.workflow
def test_outputs_manifests_and_claims(smk_run):
    res = smk_run / "results/mpdpac"
    for f in ["metrics.json", "summary.md"] + [f"figures/{x}" for x in plan.FIGURES]:
        assert (res / f).stat().st_size > 0, f
    for f in ["metrics.json", "summary.md", "decode/s0/L12_t4.json"]:
        man = json.loads((res / (f + ".manifest.json")).read_text())
        assert man["output_sha256"] and man["config_hash"] and "packages" in man, f
    assert not (smk_run / "models/mpdpac/s0/ckpt").exists()  # the spent checkpoint is removed
    met = json.loads((res / "metrics.json").read_text())
    assert set(met["runs"]) == {"L6_t1", "L12_t4", "L12_t4_v32"}
    main = met["runs"]["L12_t4"]
    assert {"base", "mps_l1", "ctrl_l1", "cal_l1", "mrs_b1", "both_l1_b1"} <= set(main)
    assert {"base", "mrs_b1", "offspec_s2", "mps_l1", "both_l1_b1"} <= set(met["runs"]["L12_t4_v32"])
    for arms in met["runs"].values():
        for by_seed in arms.values():
            s = by_seed["0"]["summary"]
            assert 0 <= s["dup_rate"] <= 1 and 0 <= s["f1"] <= 1 and len(by_seed["0"]["items"]["n_pred"]) == 16
    claims = json.loads((res / "summary.md.manifest.json").read_text())["metrics"]["claims"]
    assert len(claims) == 6 and all(c["verdict"] in VERDICTS and c["measured"] and c["reason"] for c in claims)
    # 16 test items in the smoke run: below every claim's declared minimum sample, so nothing can be decided
    assert all(c["verdict"] == "not testable at this scale" for c in claims), claims
    assert "| [mpdpac](mpdpac/summary.md) |" in (smk_run / "results/summary.md").read_text()
