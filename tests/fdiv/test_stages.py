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


def test_per_loss_jobs_write_each_run_as_the_single_run_stage_does(tmp_path):
    """`gmm-loss` / `hypergrid-loss` (one job per loss) run every model × seed of the loss in one process and
    write the per-run files (with manifests) that the single-run stages write, byte for byte."""
    c = {**cfg(), "seeds": 2}
    gp = plan.gmm_loss_params(c, "tb")
    assert [(r["model"], r["seed"]) for r in gp["runs"]] == [("gaussian", 0), ("gaussian", 1), ("tabular", 0),
                                                             ("tabular", 1)]
    stages.gmm_loss(gp, results=tmp_path / "job")
    hp = plan.hypergrid_loss_params(c, "rkl")
    stages.hypergrid_loss(hp, results=tmp_path / "job")
    for r in gp["runs"][1:3]:
        stages.gmm(r, out=tmp_path / "one.json", density=tmp_path / "one.npz")
        job = Path(plan.gmm_path(str(tmp_path / "job"), r["model"], "tb", r["seed"]))
        assert job.read_bytes() == (tmp_path / "one.json").read_bytes()
        assert json.loads(Path(str(job) + ".manifest.json").read_text())["seed"] == r["seed"]
        a, b = np.load(job.with_suffix(".npz")), np.load(tmp_path / "one.npz")
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    stages.hypergrid(hp["runs"][1], out=tmp_path / "hg.json")
    job = Path(plan.hypergrid_path(str(tmp_path / "job"), "rkl", 1))
    assert job.read_bytes() == (tmp_path / "hg.json").read_bytes()
