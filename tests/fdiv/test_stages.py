"""The fdiv stage functions called directly, and once by hand through the generated CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from paperflow.core.config import load_config
from paperflow.fdiv import plan, stages

REPO = Path(__file__).resolve().parents[2]
TINY = {"fdiv.gmm": {"steps": 4, "grid": 8, "eval_every": 2, "n_curve_samples": 200, "n_eval_samples": 200},
        "fdiv.hypergrid": {"steps": 3, "eval_every": 2, "behaviours": ["onpolicy", "lag2"]}}


def cfg() -> dict:
    return load_config(REPO / "config/test.yaml", TINY)["fdiv"]


def test_gmm_stage_writes_metrics_density_and_manifest(tmp_path):
    p = plan.gmm_params(cfg(), "tabular", "js", 0)
    res = stages.gmm(p, out=tmp_path / "r.json", density=tmp_path / "d.npz")
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert on_disk["behaviours"].keys() == res["behaviours"].keys() == {"onpolicy", "proposal", "stale"}
    dens = np.load(tmp_path / "d.npz")
    assert set(dens.files) == {"onpolicy", "proposal", "stale"}
    assert all(abs(dens[b].sum() - 1) < 1e-9 and dens[b].shape == (8, 8) for b in dens.files)
    man = json.loads((tmp_path / "r.json.manifest.json").read_text())
    assert man["seed"] == 0 and man["metrics"]["proposal"]["coverage"] >= 0


def test_hypergrid_stage_by_hand_equals_the_rules_params_path(tmp_path):
    """`--config --set ... --loss --seed` (by hand) derives the rule's `--params` and gives the same result."""
    p = plan.hypergrid_params(cfg(), "rkl", 0)
    direct = stages.hypergrid(p, out=tmp_path / "direct.json")
    cmd = [str(Path(sys.executable).with_name("paperflow")), "fdiv", "hypergrid", "--config", "config/test.yaml",
           "--set", "fdiv.hypergrid.steps=3", "--set", "fdiv.hypergrid.eval_every=2",
           "--set", "fdiv.hypergrid.behaviours=[onpolicy, lag2]", "--loss", "rkl", "--seed", "0",
           "--out", str(tmp_path / "cli.json")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((tmp_path / "cli.json").read_text()) == json.loads(json.dumps(direct))
    assert set(direct["behaviours"]) == {"onpolicy", "lag2"}
