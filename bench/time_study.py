"""Time studies' tiny default alone from a clean tree, with the host's speed before and after (issue 24).

    python bench/time_study.py robotics robopolicy [--rev HEAD] [--cores 2] [--workdir DIR]
        [--configfile config/config.yaml] [--overlay EXTRA.yaml ...] [--json OUT]

What it does, in order: `git archive REV` into a fresh DIR (default /tmp/paperflow-time/<studies>-<rev>), an
overlay enabling exactly the named studies (`paperflow.core.timing.only_overlay`), the host speed probe
(`host_speed`), `snakemake --cores N all --configfile CONFIG only.yaml [EXTRA ...]` with OMP_NUM_THREADS=1 and
HF_HUB_OFFLINE=1 (the run's output in DIR/run.log; on a host whose SLURM controller does not answer, a failing
`scontrol` first on PATH, as the tests do), the probe again, and the run's own profile
(`paperflow.core.runprofile`: job-seconds, makespan, work bound, critical path). Prints one Markdown block and
writes the numbers as JSON. It is the "measured alone" recipe of the top README in one command; a run whose
two probes differ by more than 10 % ran on a drifting host, and the output says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from paperflow.core.io import machine_info
from paperflow.core.runprofile import parse_log, summarize
from paperflow.core.timing import host_speed, only_overlay, probes_agree, run_timed, scontrol_shim, \
    unreachable_slurm_controller

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="+")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--overlay", type=Path, action="append", default=[])
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    overlay = only_overlay(a.studies)
    rev = subprocess.check_output(["git", "rev-parse", "--short", a.rev], cwd=REPO, text=True).strip()
    work = a.workdir or Path("/tmp/paperflow-time") / f"{'+'.join(a.studies)}-{rev}"
    if work.exists():  # only a folder this script made is ever deleted
        if not (work / ".paperflow-time").exists():
            raise SystemExit(f"{work} exists and was not made by time_study.py: choose another --workdir")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / ".paperflow-time").write_text("made by bench/time_study.py; deleted by its next run here\n")
    archive = subprocess.Popen(["git", "archive", rev], cwd=REPO, stdout=subprocess.PIPE)
    subprocess.check_call(["tar", "-x", "-C", str(work)], stdin=archive.stdout)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    (work / "only.yaml").write_text(yaml.safe_dump(overlay))
    extra = []
    for i, f in enumerate(a.overlay):
        dst = work / f"overlay{i}.yaml"
        shutil.copy(f, dst)
        extra.append(dst.name)

    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    shimmed = unreachable_slurm_controller()
    if shimmed:  # ≈ 9 s per snakemake start that a machine without SLURM does not pay (paperflow.core.timing)
        env["PATH"] = str(scontrol_shim(work / ".no-scontrol")) + os.pathsep + env["PATH"]
    snakemake = Path(sys.executable).parent / "snakemake"
    cmd = [str(snakemake), "--cores", str(a.cores), "all", "--configfile", a.configfile, "only.yaml", *extra]
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    before = host_speed()
    run = run_timed(cmd, work, work / "run.log", env)
    after = host_speed()
    with open(work / "run.log") as f:
        prof = summarize(parse_log(f), a.cores)
    out = {"studies": a.studies, "rev": rev, "started_utc": started, "host": machine_info(), "cores": a.cores,
           "command": " ".join(cmd[1:]), "workdir": str(work), "scontrol_shimmed": shimmed, **run,
           "probe_before": before, "probe_after": after, "host_steady": probes_agree(before, after),
           "job_seconds": prof["job_seconds"], "makespan_s": prof["makespan_s"], "work_bound_s": prof["work_bound_s"],
           "critical_path_s": prof["critical_path_s"], "jobs": prof["jobs_finished"], "per_rule": prof["per_rule"]}
    print(f"## {' + '.join(a.studies)} at {rev} ({started}, {out['host'].get('cpu', '?')}, {a.cores} cores)\n")
    print(f"- rc {run['rc']}; wall **{run['wall_s']:.1f} s** ({run['user_s']:.0f} s user + {run['sys_s']:.0f} s sys)")
    print(f"- {prof['jobs_finished']} jobs, {prof['job_seconds']:.0f} job-s; makespan {prof['makespan_s']:.0f} s, "
          f"work bound {prof['work_bound_s']:.0f} s, critical path {prof['critical_path_s']:.0f} s")
    print(f"- host probe (1-thread {int(before['n'])}² matmul, median GFLOP/s): before {before['gflops_median']:.1f}, "
          f"after {after['gflops_median']:.1f} — {'steady' if out['host_steady'] else 'DRIFTING (> 10 %)'}")
    print(f"- command (in {work}): OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 snakemake {out['command']}"
          + ("; a failing `scontrol` first on PATH (this host's SLURM controller does not answer)" if shimmed else ""))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return int(run["rc"] != 0)


if __name__ == "__main__":
    sys.exit(main())
