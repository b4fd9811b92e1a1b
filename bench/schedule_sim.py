"""Replay a Snakemake run's jobs under rule priorities: `python bench/schedule_sim.py RUN_LOG [--cores 2]
[--priorities '{"rule": 10, ...}'] [--trials 200]`.

Reads the jobs, their dependencies and durations from the run's own log (`paperflow.core.runprofile`),
then list-schedules them on `cores` cores: among ready jobs the highest priority starts first, ties in a
random order (one order per trial). Prints the makespan's mean / min / max over the trials, without
priorities and with the given ones. A model, not a measurement: Snakemake's own tie-breaking and start-up
gaps are not modelled; use it to compare priority schemes, then measure the one chosen.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from paperflow.core.runprofile import parse_log


def makespan(jobs: dict, prio: dict[str, int], cores: int, rnd: random.Random) -> float:
    order = {k: rnd.random() for k in jobs}
    dur = {k: (j.end - j.start).total_seconds() for k, j in jobs.items()}
    done: set = set()
    running: list[tuple[float, int]] = []
    t = 0.0
    while len(done) < len(jobs):
        busy = {k for _, k in running}
        ready = sorted((k for k, j in jobs.items() if k not in done and k not in busy and set(j.preds) <= done),
                       key=lambda k: (-prio.get(jobs[k].rule, 0), order[k]))
        while len(running) < cores and ready:
            k = ready.pop(0)
            running.append((t + dur[k], k))
        running.sort()
        t, k = running.pop(0)
        done.add(k)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--priorities", type=json.loads, default={})
    ap.add_argument("--trials", type=int, default=200)
    a = ap.parse_args()
    with a.log.open() as f:
        jobs = parse_log(f)
    for name, prio in (("no priorities", {}), ("priorities", a.priorities)):
        r = [makespan(jobs, prio, a.cores, random.Random(s)) for s in range(a.trials)]
        print(f"{name}: makespan mean {sum(r) / len(r):.0f} s, min {min(r):.0f}, max {max(r):.0f} "
              f"({len(jobs)} jobs, {a.cores} cores, {a.trials} tie orders)")


if __name__ == "__main__":
    main()
