"""The robotics study end to end on config/test.yaml (sim -> extract -> LAMs -> eval -> report)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperflow.core.config import load_config
from paperflow.core.io import read_manifest
from paperflow.robotics import plan

REPO = Path(__file__).resolve().parents[2]
RES = "results/robotics/mvplam"


@pytest.fixture(scope="module")
def run_dir(smk_run):
    """The shared smoke run of config/test.yaml (tests/conftest.py) — no private snakemake run."""
    return smk_run


@pytest.mark.workflow
def test_outputs_and_manifests(run_dir):
    cfg = load_config(REPO / "config" / "test.yaml")["robotics"]
    for f in ("summary.md", "metrics.json", "frames.png", "action_info.png"):
        assert (run_dir / RES / f).stat().st_size > 0
    man = read_manifest(run_dir / RES / "summary.md")
    claims = man["metrics"]["claims"]
    assert len(claims) == 5
    # the action-visibility check comes first (issue 16 item 2), with its per-probe numbers
    assert claims[0]["claim"].startswith("[diagnostic] the action is visible")
    vis = json.loads((run_dir / RES / "action_visibility.json").read_text())
    assert {"raw_slot0", "stem_slot0", "raw_slot1", "stem_slot1"} <= set(vis["probes"])
    text = (run_dir / RES / "summary.md").read_text()
    assert text.index("Action-visibility check") < text.index("## Setup")
    # the smoke profile (1 seed, a few dozen test pairs) is below every declared minimum sample
    for c in claims:
        assert c["verdict"] == "not testable at this scale" and "below the declared minimum" in c["reason"], c
    for c in claims[1:]:
        assert "1 seed" in c["sample"] and "test pairs" in c["sample"] and c["paper"]
    # the extract stage's manifest carries the job's parameters and the dataset counts
    mv = run_dir / "data/robotics/mv"
    em = read_manifest(mv)
    assert em["config"] == plan.extract_params(cfg)
    dm = json.loads((mv / "manifest.json").read_text())
    n_sessions = cfg["sim"]["n_sessions"] * cfg["sim"]["episodes_per_session"]
    assert sum(dm["kept"].values()) + sum(dm["drop_reasons"].values()) == n_sessions
    assert dm["counts"]["latency_shifted"] > 0  # test config has legacy (pre-2021) sessions
    for model in cfg["lam"]["models"]:
        for seed in cfg["seeds"]:
            m = json.loads((run_dir / RES / model / f"seed{seed}" / "metrics.json").read_text())
            assert m["n_pairs"]["test"] > 0 and isinstance(m["slot0"]["ksg"], float)
            per_dim = m["slot0"]["probe_nmse_per_dim"]  # one per probed action dim, averaging to the probe NMSE
            assert len(per_dim) == len(cfg["eval"]["action_dims"])
            assert sum(per_dim) / len(per_dim) == pytest.approx(m["slot0"]["probe_nmse"])
            tm = read_manifest(run_dir / f"models/robotics/mvplam/{model}/seed{seed}")
            assert tm["seed"] == seed and tm["config"] == plan.train_params(cfg, model)
            assert (run_dir / f"models/robotics/mvplam/{model}/seed{seed}/model.safetensors").exists()
    agg = json.loads((run_dir / RES / "metrics.json").read_text())
    assert set(agg["models"]) == set(cfg["lam"]["models"])
    assert "## Probe NMSE per action dimension (slot 0" in text


@pytest.mark.workflow
def test_cli_by_hand_derives_same_params(run_dir, tmp_path):
    """`paperflow robotics extract --config FILE` by hand plans the rule's job from the config: the same
    parameters in its manifest and the same dataset statistics as the workflow's extract."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1", PAPERFLOW_PROGRESS="0")
    out = tmp_path / "mv"
    r = subprocess.run([sys.executable, "-m", "paperflow.cli", "robotics", "extract", "--config",
                        str(REPO / "config" / "test.yaml"), "--raw", str(run_dir / "data/robotics/sim/raw"),
                        "--out", str(out)], env=env, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert read_manifest(out)["config"] == read_manifest(run_dir / "data/robotics/mv")["config"]
    assert (out / "stats.json").read_text() == (run_dir / "data/robotics/mv/stats.json").read_text()
