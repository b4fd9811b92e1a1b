"""The robopolicy study end to end on config/test.yaml (its own targets only): data -> S1 -> S2/S3 per
variant -> closed-loop evaluation -> LARA report; GAM seeds -> report; combined summary."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperflow.core.io import read_json, read_manifest
from paperflow.core.config import load_config
from paperflow.robopolicy import plan

REPO = Path(__file__).resolve().parents[2]
RES = "results/robotics"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("robopolicy_wf")
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", PAPERFLOW_PROGRESS="0",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cfg = load_config(REPO / "config" / "test.yaml")["robopolicy"]
    targets = plan.targets(cfg, "results")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(d), "--configfile",
           str(REPO / "config" / "test.yaml"), "--cores", "2", *targets, "--quiet", "all"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return d


@pytest.mark.workflow
def test_outputs_manifests_and_claims(run_dir):
    cfg = load_config(REPO / "config" / "test.yaml")["robopolicy"]
    for f in plan.targets(cfg, "results"):
        assert (run_dir / f).stat().st_size > 0, f
    for sub in ("lara", "gam"):
        man = read_manifest(run_dir / RES / sub / "summary.md")
        claims = man["metrics"]["claims"]
        assert claims and {c["verdict"] for c in claims} <= {"held", "did not hold", "partly", "not testable at this scale"}
    comb = read_manifest(run_dir / RES / "robopolicy_summary.md")
    assert len(comb["metrics"]["claims"]) == sum(
        len(read_manifest(run_dir / RES / s / "summary.md")["metrics"]["claims"]) for s in ("lara", "gam"))
    assert "reconstruction" in (run_dir / RES / "gam" / "summary.md").read_text()


@pytest.mark.workflow
def test_lara_metrics_come_from_the_simulator(run_dir):
    cfg = load_config(REPO / "config" / "test.yaml")["robopolicy"]
    agg = read_json(run_dir / RES / "lara" / "metrics.json")
    assert set(agg["variants"]) == set(cfg["lara"]["variants"])
    ev = cfg["lara"]["eval"]
    n = ev["n_tasks"] * ev["episodes_per_task"] * len(cfg["seeds"])
    for v, row in agg["variants"].items():
        assert row["train_like/chunk0"]["n"] == n
    assert agg["reference"]["oracle"]["n"] == n
    # frozen_align leaves the S1 LAM untouched; lara changes it
    assert all(x == 0 for x in agg["variants"]["frozen_align"]["lam_param_change"])
    assert all(x > 0 for x in agg["variants"]["lara"]["lam_param_change"])
    # the data went through the robotics extractor (Arrow shards + stats.json + manifest)
    dman = read_manifest(run_dir / "data" / "robopolicy" / "mv")
    assert dman["metrics"]["episodes"] == cfg["lara"]["sim"]["n_sessions"] * cfg["lara"]["sim"]["episodes_per_session"]


@pytest.mark.workflow
def test_gam_metrics(run_dir):
    agg = read_json(run_dir / RES / "gam" / "metrics.json")
    assert set(agg["conditions"]) == {"train_like", "speed_0.5x", "speed_2x", "pose", "nonaffine"}
    for c in agg["conditions"].values():
        for m in c.values():
            assert 0.0 <= m["success"] <= 1.0
