"""The fmri study end to end on config/test.yaml (8 mm grid, tiny cohorts, 4-step MAE) in a temp dir."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.workflow
def test_fmri_workflow_on_test_config(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PAPERFLOW_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(REPO / "config/test.yaml"), "--cores", "2", "--quiet", "all", "--",
           "results/fmri/summary.md"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = tmp_path / "results" / "fmri"
    tier = res / "micro"
    # geometry: the three operators + their manifest
    geo = json.loads((tier / "geometry" / "geometry.json").read_text())
    assert geo["flat"]["D"] == 5044 and geo["flat"]["n_nonempty_patches"] == 106
    assert json.loads((tier / "geometry.manifest.json").read_text())["stage"] == "fmri.geometry"
    # prep: Arrow datasets per space, manifests with projection throughput and reconstruction check
    for cohort in ("pretrain", "state", "trait"):
        man = json.loads((tmp_path / "data/fmri/micro/prep" / f"{cohort}.manifest.json").read_text())
        assert man["metrics"]["runs"] > 0 and man["metrics"]["frames_per_s"] > 0
        for space in ("flat", "parcel", "volume"):
            assert (tmp_path / "data/fmri/micro/prep" / cohort / space / "dataset_dict.json").exists()
    # NIfTI runs are temp(): removed after prep
    assert not (tmp_path / "data/fmri/micro/synth").exists() or not list((tmp_path / "data/fmri/micro/synth").rglob("*.nii.gz"))
    # evaluation: every probe and chance
    met = json.loads((tier / "eval" / "metrics.json").read_text())
    assert set(met["tasks"]) == {"state6", "trait_group", "trait_age"}
    assert met["chance"]["state6"] == pytest.approx(1 / 6)
    st = met["tasks"]["state6"]
    assert {"FC (parcel clip)", "MAE flat-s0", "MAE parcel-s0", "MAE volume-s0", "MAE flat-rand"} <= set(st)
    assert all(0.0 <= v["mean"] <= 1.0 and v["n_splits"] == 2 for v in st.values())
    assert met["tasks"]["trait_group"]["FC (parcel, whole run)"]["n_splits"] == 3
    # training results, scaling, figures, summary with its claims manifest
    run = json.loads((tmp_path / "models/fmri/micro/train/flat-s0/result.json").read_text())
    assert run["history"][-1]["step"] == 4 and 0.5 < run["initial_loss"] < 1.5
    assert (tier / "scaling" / "fit.json").exists() and (tier / "scaling" / "curve.png").stat().st_size > 1000
    for fig in ("flatmap_patterns.png", "probes.png", "reconstruction.png"):
        assert (tier / "figures" / fig).stat().st_size > 1000
    summary = (res / "summary.md").read_text()
    assert "FC" in summary and "chance" in summary
    claims = json.loads((res / "summary.md.manifest.json").read_text())["metrics"]["claims"]
    proj = next(c for c in claims if c["claim"].startswith("Projection (volume"))
    assert proj["verdict"] == "held"
    assert any(c["claim"].startswith("State decoding") for c in claims)
