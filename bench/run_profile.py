"""Where a Snakemake run's wall time went: `python bench/run_profile.py RUN_LOG [--cores 2] [--json OUT]`.

RUN_LOG is the run's own output (`snakemake ... > run.log 2>&1`, or `.snakemake/log/*.snakemake.log`).
Prints the makespan, the job-seconds, the two lower bounds on wall time (job-seconds / cores and the
critical path of dependent jobs), per-rule totals and the critical path itself
(`paperflow.core.runprofile`). Used for the per-study budgets of issue 24 (top README).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from paperflow.core.runprofile import parse_log, summarize, to_markdown


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    with a.log.open() as f:
        s = summarize(parse_log(f), a.cores)
    print(to_markdown(s))
    if a.json:
        a.json.write_text(json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
