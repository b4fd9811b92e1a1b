"""Shared fixtures. Tests run with OMP_NUM_THREADS=1 (set here before torch/numpy spin up threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PAPERFLOW_PROGRESS", "0")
# rules call the `paperflow` entry point: the venv running the tests must be on PATH for its jobs
_VENV_BIN = str(Path(sys.executable).parent)
if _VENV_BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _VENV_BIN + os.pathsep + os.environ.get("PATH", "")



# A SLURM client without a reachable controller (a machine left with a slurm.conf by `.ci/slurm.sh`) makes every
# snakemake start wait ≈ 10 s: the SLURM executor plugin probes `scontrol show config` when it loads. The tests'
# snakemake runs are local (the SLURM tests use their own stand-in binaries), so a failing `scontrol` goes first
# on PATH there (paperflow.core.timing, shared with bench/time_study.py).
from paperflow.core.timing import scontrol_shim, unreachable_slurm_controller  # noqa: E402

if unreachable_slurm_controller():
    import atexit
    import shutil
    import tempfile

    _shim = scontrol_shim(tempfile.mkdtemp(prefix="paperflow-no-slurmctld-"))
    atexit.register(shutil.rmtree, _shim, True)
    os.environ["PATH"] = str(_shim) + os.pathsep + os.environ["PATH"]

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, check: bool = True,
              timeout: int = 1800) -> subprocess.CompletedProcess:
    """Run the repo's workflow with `workdir` as working directory (outputs land there)."""
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(configfile or REPO / "config" / "test.yaml"), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def only_studies(tmp: Path, keep: set[str], base: Path | None = None, edit=None) -> Path:
    """A copy of config/test.yaml with every study not in `keep` disabled (optionally edited)."""
    cfg = yaml.safe_load((base or REPO / "config" / "test.yaml").read_text())
    for key, val in cfg.items():
        if isinstance(val, dict) and "enabled" in val and key not in keep:
            val["enabled"] = False
    if edit:
        edit(cfg)
    out = tmp / "config.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out


@pytest.fixture(scope="session")
def smk_run(tmp_path_factory) -> Path:
    """The whole workflow run once on config/test.yaml (every enabled study); returns the workdir."""
    import time

    wd = tmp_path_factory.mktemp("smk_test_run")
    t0 = time.perf_counter()
    snakemake(wd, "--cores", "2", "all")
    _SMOKE_S.append(time.perf_counter() - t0)
    return wd


# ---- test time per study (printed at the end of every run; budget: ≤ 30 s per study on 2 cores) ----
_TIMES: dict[str, float] = {}
_SMOKE_S: list[float] = []


def pytest_runtest_logreport(report):  # noqa: D103
    parts = Path(report.nodeid.split("::")[0]).parts
    group = parts[1] if len(parts) > 2 and parts[0] == "tests" else "(top)"
    _TIMES[group] = _TIMES.get(group, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):  # noqa: D103
    if not _TIMES:
        return
    tr = terminalreporter
    tr.section("test time per study (s; setup incl. fixtures)")
    for group, t in sorted(_TIMES.items(), key=lambda kv: -kv[1]):
        tr.write_line(f"{group:<14} {t:8.1f}")
    if _SMOKE_S:
        tr.write_line(f"{'(shared smoke run of config/test.yaml, counted in the first group that used it)'}: "
                      f"{_SMOKE_S[0]:.1f} s")
    tr.write_line(f"{'total':<14} {sum(_TIMES.values()):8.1f}")
