"""Timing a study's tiny default the way issue 24's budgets are stated: alone, from a clean tree, on N cores.

The wall time of the same code on these shared 2-core hosts drifts by 15 % within an hour and by up to 1.7x
between machines (top README), so a time alone does not say whether code or host changed. Each
measurement therefore carries a **host speed probe** taken just before and just after the run: single-thread
float32 matrix products at the sizes of our tiny models (torch, one intra-op thread, as every job runs).
Two runs are comparable when their probes agree; a run whose probes disagree ran on a drifting host.

Pieces (used by `bench/time_study.py`):
- `only_overlay`: the config overlay that enables exactly the named studies (every other one off);
- `host_speed`: the probe (GFLOP/s, median and best of short repeats);
- `run_timed`: a command's wall time and its children's user/sys CPU (`getrusage`), the output in a log;
- `unreachable_slurm_controller` / `scontrol_shim`: on a machine with a SLURM client whose controller does not
  answer (a login node with `slurmctld` down, or a CI machine after `.ci/slurm.sh`), every snakemake start waits
  ≈ 9 s for the executor plugin's `scontrol show config`; timings and the test suite put a failing `scontrol`
  first on PATH there, so a local run is timed as on a machine without SLURM.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paperflow.core.config import study_names


def only_overlay(keep: Sequence[str], studies: Sequence[str] | None = None) -> dict[str, dict[str, bool]]:
    """`{study: {"enabled": study in keep}}` for every study: a `--configfile` overlay that runs `keep` alone.

    Raises ValueError for a name in `keep` that is not a study (a typo would otherwise time nothing)."""
    names = list(study_names() if studies is None else studies)
    unknown = sorted(set(keep) - set(names))
    if unknown:
        raise ValueError(f"not a study: {', '.join(unknown)} (studies: {', '.join(names)})")
    if not keep:
        raise ValueError("no study to time")
    return {s: {"enabled": s in keep} for s in names}


def host_speed(seconds: float = 1.0, n: int = 256, repeats: int = 5) -> dict[str, float]:
    """Single-thread float32 matmul throughput (GFLOP/s) of n x n products: median and best of `repeats`
    timed batches, `seconds` in all. torch runs with one intra-op thread (as the jobs do) and is restored."""
    import torch

    if seconds <= 0 or n < 1 or repeats < 1:
        raise ValueError("seconds, n and repeats must be positive")
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        out = torch.empty(n, n)
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)  # warm-up, and a first estimate of one product's time
        one = max(time.perf_counter() - t0, 1e-6)
        per_batch = max(1, int(seconds / repeats / one))
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(per_batch):
                torch.mm(a, b, out=out)
            dt = time.perf_counter() - t0
            rates.append(2.0 * n**3 * per_batch / dt / 1e9)
    finally:
        torch.set_num_threads(prev)
    rates.sort()
    return {"gflops_median": rates[len(rates) // 2], "gflops_best": rates[-1], "n": float(n)}


def run_timed(cmd: Sequence[str], cwd: str | Path, log: str | Path,
              env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd` in `cwd` (stdout and stderr to `log`); its wall time, its children's user and sys CPU
    seconds (this process's `RUSAGE_CHILDREN` before and after: only children waited for count) and rc."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call(list(cmd), cwd=str(cwd), stdout=f, stderr=subprocess.STDOUT,
                             env=dict(os.environ if env is None else env))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"rc": rc, "wall_s": wall, "user_s": after.ru_utime - before.ru_utime,
            "sys_s": after.ru_stime - before.ru_stime}


def probes_agree(before: Mapping[str, float], after: Mapping[str, float], rtol: float = 0.1) -> bool:
    """True when the host's median throughput moved by at most `rtol` (relative to the larger) during a run."""
    a, b = float(before["gflops_median"]), float(after["gflops_median"])
    if a <= 0 or b <= 0:
        raise ValueError("throughputs must be positive")
    return abs(a - b) <= rtol * max(a, b)


def unreachable_slurm_controller(conf: str | Path | None = None, timeout: float = 0.5) -> bool:
    """True when `scontrol` is installed and a slurm.conf is readable, but the controller it names (SlurmctldHost /
    ControlMachine, SlurmctldPort; default localhost:6817) refuses or ignores a TCP connection within `timeout`."""
    if shutil.which("scontrol") is None:
        return False
    path = Path(conf or os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    host, port = "localhost", 6817
    try:
        for line in path.read_text().splitlines():
            key, _, val = line.partition("=")
            if key.strip().lower() in ("slurmctldhost", "controlmachine") and val.strip():
                host = val.split("(")[0].strip()
            elif key.strip().lower() == "slurmctldport" and val.strip():
                port = int(val.strip().split("-")[0])
    except (OSError, ValueError):
        return False  # no readable slurm.conf: scontrol fails at once, nothing to avoid
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except OSError:
        return True


def scontrol_shim(directory: str | Path) -> Path:
    """Write an `scontrol` that fails at once into `directory` (to put first on PATH); returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    f = d / "scontrol"
    f.write_text("#!/bin/sh\necho 'scontrol: no controller (paperflow shim)' >&2\nexit 1\n")
    f.chmod(0o755)
    return d
