"""Workflow-level tests: lint, dry runs, schema errors before any job, a real run of config/test.yaml,
kill-and-resume determinism, and parameter-precise reruns (bandits study as the reference)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import yaml

from tests.conftest import REPO, SNAKEMAKE, only_studies, snakemake
from paperflow.core.io import read_json, read_manifest

# wall-clock measurements (seconds): `*_s`, `*_s_mean`, `*_s_se`, at any depth (e.g. stats.design_fit_s)
VOLATILE = re.compile(r"_s(_mean|_se)?$")


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if not VOLATILE.search(k)}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _stable_rows(metrics_path: Path) -> list[dict]:
    return _stable(read_json(metrics_path)["rows"])


def test_lint_clean(tmp_path):
    p = subprocess.run([SNAKEMAKE, "--lint"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


def test_dry_run_default_config(tmp_path):
    p = snakemake(tmp_path, "-n", configfile=REPO / "config" / "config.yaml")
    assert "bandits_simulate" in p.stdout and "summary_all" in p.stdout


def test_dry_run_real_unlearning_config(tmp_path):
    """config/unlearning_real.yaml names one study only; the README's command for it must plan."""
    p = snakemake(tmp_path, "-n", "results/unlearning/smollm2/summary.md",
                  configfile=REPO / "config" / "unlearning_real.yaml")
    assert "lm_convert_smollm2" in p.stdout and "unlearning_finetune" in p.stdout


def test_configfile_replaces_the_default_from_the_repo_root():
    """From the repo root (where config/config.yaml exists) `--configfile X` means X alone: the studies
    config.yaml enables do not leak into a config that leaves them out."""
    p = subprocess.run([SNAKEMAKE, "-n", "all", "--configfile", "config/unlearning_real.yaml"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "unlearning_finetune" in p.stdout
    for other in ("hashing_train", "bandits_simulate", "fmri_", "robotics_sim", "quantization_"):
        assert other not in p.stdout


def test_bad_config_stops_before_any_job(tmp_path):
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    cfg["bandits"]["regimes"]["small_k"]["Kay"] = 3
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    wd = tmp_path / "wd"
    wd.mkdir()
    p = snakemake(wd, "--cores", "1", configfile=bad, check=False)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "bandits.regimes.small_k.Kay" in out and str(bad) in out
    assert not (wd / "results").exists()


def test_test_config_run_outputs_and_manifests(smk_run):
    res = smk_run / "results"
    summary = (res / "summary.md").read_text()
    assert "| [bandits](bandits/summary.md) |" in summary
    for f in ["metrics.json", "summary.md", "figures/regret_curves.png", "figures/budget.png", "figures/glm.png"]:
        p = res / "bandits" / f
        assert p.stat().st_size > 0
        m = read_manifest(p)
        assert {"config_hash", "seed", "packages", "inputs", "wall_time_s", "metrics"} <= m.keys()
    cells = list((res / "bandits" / "runs").rglob("*.json"))
    cells = [c for c in cells if not c.name.endswith(".manifest.json")]
    assert len(cells) == read_json(res / "bandits" / "metrics.json")["n_cells"]
    m = read_manifest(cells[0])
    assert m["seed"] == read_json(cells[0])["params"]["seed"] and m["metrics"]
    claims = read_manifest(res / "bandits" / "summary.md")["metrics"]["claims"]
    from paperflow.core.verdict import OUTCOMES

    assert claims and all(c["verdict"] in OUTCOMES for c in claims)


def _bandits_cells_done(wd: Path) -> int:
    return sum(1 for p in (wd / "results/bandits/runs").rglob("*.json.manifest.json")) if (wd / "results").exists() else 0


def test_kill_and_resume_gives_same_metrics(tmp_path, smk_run):
    cfg = only_studies(tmp_path, {"bandits"})
    wd = tmp_path / "wd"
    wd.mkdir()
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(wd), "--configfile", str(cfg), "--cores", "2",
           "results/bandits/metrics.json"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 600
    while _bandits_cells_done(wd) < 6 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, f"run ended (rc {proc.returncode}, {_bandits_cells_done(wd)} cells) before the kill"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (wd / "results/bandits/metrics.json").exists()
    snakemake(wd, "--unlock", configfile=cfg)  # a SIGKILLed run leaves its lock, as it would for a user
    snakemake(wd, "--cores", "2", "--rerun-incomplete", "results/bandits/metrics.json", configfile=cfg)
    assert _stable_rows(wd / "results/bandits/metrics.json") == _stable_rows(smk_run / "results/bandits/metrics.json")

    # changing one parameter reruns exactly the jobs that depend on it
    def edit(c):
        c["bandits"]["algorithms"]["rs_oful"]["C"] = 2.0

    (tmp_path / "edited").mkdir()
    cfg2 = only_studies(tmp_path / "edited", {"bandits"}, edit=edit)
    p = snakemake(wd, "-n", "results/bandits/metrics.json", configfile=cfg2)
    outs = re.findall(r"output: (results/bandits/runs/\S+?\.json)", p.stdout)
    c = yaml.safe_load(cfg.read_text())["bandits"]
    expected = len(c["regimes"]) * len(c["T"]) * c["seeds"]
    assert outs and all("/main/" in o and "/rs_oful/" in o for o in outs), outs
    assert len(outs) == expected


def test_html_report_has_every_study_figure(smk_run):
    snakemake(smk_run, "--report", "report.html")
    html = (smk_run / "report.html").read_text(errors="ignore")
    assert len(html) > 10_000
    for png in (smk_run / "results" / "bandits" / "figures").glob("*.png"):
        assert png.name in html


def test_jobs_run_without_activated_venv(tmp_path):
    """`.venv/bin/snakemake` with the venv's bin dir *not* on PATH still finds the project's CLI for its jobs."""
    cfg = only_studies(tmp_path, {"hashing"})
    venv_bin = str(Path(SNAKEMAKE).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env = {**os.environ, "PATH": path or "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    wd = tmp_path / "wd"
    p = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(wd), "--configfile", str(cfg),
                        "--cores", "1", "data/hashing/raw/synth.mat"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (wd / "data/hashing/raw/synth.mat").stat().st_size > 0
    assert (wd / "data/hashing/raw/synth.mat.manifest.json").exists()
