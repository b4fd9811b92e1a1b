"""The docloc part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import numpy as np
import pytest

pytestmark = pytest.mark.workflow


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/docloc"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 9
    assert {c["verdict"] for c in claims} <= {"held", "did not hold", "partly", "not testable at this scale",
                                              "inconclusive"}
    # one training seed (the smoke config) can never decide a learned-arm claim
    learned = [c for c in claims if not c["claim"].startswith("Fixed potentials")]
    assert all(c["verdict"] == "not testable at this scale" for c in learned)
    assert "reconstruction" in (res / "summary.md").read_text() and "± 0.000" not in (res / "summary.md").read_text()
    for f in ("iou_by_stage.png", "evidence_maps.png", "mechanics.png"):
        assert (res / "figures" / f).stat().st_size > 1000


def test_runs_are_paired_and_complete(smk_run):
    m = json.loads((smk_run / "results/docloc/metrics.json").read_text())
    assert set(m["runs"]) == {"single", "jko_b", "poe"}
    qids = {v: r["seeds"]["0"]["splits"]["test_ood"]["qid"] for v, r in m["runs"].items()}
    assert len(set(map(tuple, qids.values()))) == 1 and len(qids["single"]) == 16
    assert len(m["runs"]["jko_b"]["seeds"]["0"]["splits"]["test_ood"]["iou_stages"]) == 3
    for v, r in m["runs"].items():
        for split in ("val", "test_id", "test_ood"):
            d = r["seeds"]["0"]["splits"][split]
            assert all(0.0 <= x <= 1.0 for k in ("acc50", "iou", "mass", "anls") for x in d[k])
        # the resumable state is removed once a run is evaluated; the weights and examples stay
        model_dir = smk_run / f"models/docloc/{v}/s0"
        assert (model_dir / "model.safetensors").exists() and not (model_dir / "ckpt").exists()
        with np.load(smk_run / f"results/docloc/runs/{v}/s0.examples.npz") as z:
            assert z["rho"].shape[1:] == (2, 32, 32) and np.allclose(z["rho"].sum((-2, -1)), 1.0, atol=1e-3)
    assert m["runs"]["poe"]["seeds"]["0"]["gamma"] in (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
    assert set(m["mechanics"]["per_page"]["0.12"]) >= {"gibbs", "coarse", "poe", "jko_t0.005_K3"}
