"""The mi_gate part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import pytest

pytestmark = pytest.mark.workflow


def test_outputs_manifests_and_verdicts(smk_run):
    res = smk_run / "results/mi_gate"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert len(claims) == 8
    # one seed (the smoke config) can never decide a paired claim (only the sanity cross-tab can be decided)
    paired = [c for c in claims if not c["claim"].startswith("Sanity")]
    assert len(paired) == 7 and all(c["verdict"] == "not testable at this scale" for c in paired)
    text = (res / "summary.md").read_text()
    assert "by construction" in text and "± 0.000" not in text
    assert (res / "figures/vie_by_corruption.png").stat().st_size > 1000


def test_runs_gate_and_data(smk_run):
    m = json.loads((smk_run / "results/mi_gate/metrics.json").read_text())
    assert set(m["runs"]) == {"original", "gated_t0.5"}
    g = m["gate"]
    assert g["selected"]["0.5"] == g["n_valid"] // 2 and sum(map(sum, g["crosstab"])) > 0
    run = m["runs"]["gated_t0.5"]["seeds"]["0"]
    assert run["n_augmented"] == g["selected"]["0.5"] and "interactions" in run
    assert set(run["test"]["T1"]) == {"clean", "noise2", "occlusion", "worddrop"}
    for tv in ("T0", "T1"):
        assert run["test"][tv]["clean"]["vie"] == 0.0 and 0.0 <= run["test"][tv]["noise2"]["vie"] <= 1.0
    records = json.loads((smk_run / "data/mi_gate/synth/data.json").read_text())
    assert len(records) == 600 and {"id", "original_text", "correct_answer", "split"} <= set(records[0])
