"""paperflow.core.timing: the pieces of bench/time_study.py (overlay, host probe, timed run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from paperflow.core.config import study_names
from paperflow.core.timing import host_speed, only_overlay, probes_agree, run_timed


def test_only_overlay_enables_exactly_the_named_studies() -> None:
    ov = only_overlay(["robotics", "robopolicy"])
    assert set(ov) == set(study_names())
    assert {s for s, v in ov.items() if v["enabled"]} == {"robotics", "robopolicy"}
    assert yaml.safe_load(yaml.safe_dump(ov)) == ov  # written as a --configfile overlay


def test_only_overlay_rejects_a_typo_and_an_empty_list() -> None:
    with pytest.raises(ValueError, match="not a study: robotix"):
        only_overlay(["robotix"])
    with pytest.raises(ValueError, match="no study"):
        only_overlay([], studies=["a", "b"])


def test_host_speed_measures_a_positive_throughput_and_restores_threads() -> None:
    import torch

    prev = torch.get_num_threads()
    s = host_speed(seconds=0.05, n=64, repeats=3)
    assert 0 < s["gflops_median"] <= s["gflops_best"]
    assert s["n"] == 64
    assert torch.get_num_threads() == prev
    with pytest.raises(ValueError):
        host_speed(seconds=0)


def test_run_timed_reports_the_childs_cpu_time_rc_and_output(tmp_path) -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nprint('done')\n"
    r = run_timed([sys.executable, "-c", busy], tmp_path, tmp_path / "out.log")
    assert r["rc"] == 0
    assert r["user_s"] + r["sys_s"] >= 0.25  # the child's CPU, not this process's
    assert r["wall_s"] >= r["user_s"] * 0.5
    assert (tmp_path / "out.log").read_text().strip() == "done"
    bad = run_timed([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path, tmp_path / "bad.log")
    assert bad["rc"] == 3


def test_probes_agree_within_the_tolerance_only() -> None:
    assert probes_agree({"gflops_median": 100.0}, {"gflops_median": 92.0})
    assert not probes_agree({"gflops_median": 100.0}, {"gflops_median": 85.0})
    assert not probes_agree({"gflops_median": 70.0}, {"gflops_median": 100.0})
    with pytest.raises(ValueError):
        probes_agree({"gflops_median": 0.0}, {"gflops_median": 1.0})


def test_unreachable_slurm_controller_reads_the_conf_and_probes_the_port(tmp_path, monkeypatch) -> None:
    import socket

    from paperflow.core.timing import scontrol_shim, unreachable_slurm_controller

    bin_dir = scontrol_shim(tmp_path / "bin")  # an `scontrol` on PATH: the client counts as installed
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    proc = subprocess.run([str(bin_dir / "scontrol"), "show", "config"], capture_output=True, text=True)
    assert proc.returncode == 1 and "no controller" in proc.stderr
    assert not unreachable_slurm_controller(tmp_path / "missing.conf")  # no conf: scontrol fails at once
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=x\nSlurmctldHost=127.0.0.1(ctl)\nSlurmctldPort={port}\n")
    try:
        assert not unreachable_slurm_controller(conf)  # a controller answers
    finally:
        srv.close()
    assert unreachable_slurm_controller(conf)  # the same port, nobody listening
