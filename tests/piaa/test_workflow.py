"""Workflow: the piaa outputs of the shared config/test.yaml run (`smk_run`), and that a method parameter
change reruns evaluation but not data, text or backbone training (one dry run)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, snakemake

VERDICTS = {"held", "did not hold", "partly", "not testable at this scale", "inconclusive"}


@pytest.mark.workflow
def test_outputs_metrics_and_summary(smk_run):
    res = smk_run / "results/piaa"
    for f in ["metrics.json", "summary.md", "runs/s0.json", "figures/map_by_tercile.png",
              "figures/temperature_grid.png", "figures/patch_maps.png"]:
        assert (res / f).stat().st_size > 0, f
    for f in ["metrics.json", "summary.md", "runs/s0.json"]:
        man = json.loads((res / (f + ".manifest.json")).read_text())
        assert man["output_sha256"] and man["config_hash"], f
    met = json.loads((res / "metrics.json").read_text())
    for arm in ("a1_cls", "a2_patch_van", "a3_patch_sclip", "a4_text", "a4_pvcl", "a5_piaa", "a5_tuned",
                "abl_mean", "abl_lse", "abl_no_refine", "abl_k8"):
        m = met["arms"][arm]["map"][0]
        assert 0 < m <= 1, arm
        assert set(met["arms"][arm]["map_by_tercile"]) == {"small", "medium", "large"}
    # the grid is reported in full: every cell of config/test.yaml's grid (1 τ_d × 2 T_inf × 1 × 1)
    assert len(met["grid"][0]) == 2 and all("holdout_map" in c and "test_map" in c for c in met["grid"][0])
    assert met["grid_choice"][0] in met["grid"][0] or met["grid_choice"][0]["holdout_map"] == max(
        c["holdout_map"] for c in met["grid"][0])
    d = met["diagnostics"]
    assert {"entanglement_van", "entanglement_sclip", "gap_patch_sclip", "gap_cls_caption"} <= set(d)
    claims = json.loads((res / "summary.md.manifest.json").read_text())["metrics"]["claims"]
    assert len(claims) == 5 and all(c["verdict"] in VERDICTS and c["reason"] for c in claims)
    # one seed in the smoke profile: no claim can be decided
    assert all(c["verdict"] == "not testable at this scale" for c in claims), claims
    text = (res / "summary.md").read_text()
    assert "1 seed" in text and "not the paper's pretrained" in text


@pytest.mark.workflow
def test_method_change_reruns_only_evaluation(smk_run, tmp_path):
    override = tmp_path / "override.yaml"
    override.write_text("piaa:\n  method: {alpha_patch: 150.0}\n")
    out = snakemake(smk_run, "-n", "results/piaa/summary.md", "--configfile", str(REPO / "config/test.yaml"),
                    str(override), configfile=REPO / "config/test.yaml")
    text = out.stdout + out.stderr
    assert "piaa_evaluate" in text and "piaa_summary" in text
    for rule in ("piaa_generate", "piaa_prepare", "piaa_text", "piaa_train"):
        assert rule not in text, rule
