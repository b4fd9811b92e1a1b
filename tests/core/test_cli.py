from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "paperflow.cli", *args], capture_output=True, text=True, cwd=REPO)


def test_help_and_studies():
    p = _run("--help")
    assert p.returncode == 0 and "studies" in p.stdout
    p = _run("studies")
    assert p.returncode == 0
    assert "bandits:" in p.stdout and "simulate" in p.stdout and "summary" in p.stdout


def test_stage_runs_by_hand_from_config(tmp_path):
    out = tmp_path / "cell.json"
    p = _run("bandits", "simulate", "--config", "config/test.yaml", "--exp", "main", "--regime", "small_k", "--variant",
             "blce", "--T", "300", "--seed", "0", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert out.exists() and (tmp_path / "cell.json.manifest.json").exists()
