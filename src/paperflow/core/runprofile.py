"""Where a Snakemake run's wall time went, read back from its own log.

Snakemake's default log prints, for every job, a timestamp line, `rule NAME:` (or `localrule`), its
`input:`, `output:`, `wildcards:`, `jobid:` and `reason:` (a rule with a `message:` prints `Job N: MESSAGE`
and `Reason:` instead), and later a timestamp and `Finished jobid: N (Rule: NAME)`. The inputs that
another job of the run produced are listed in the reason ("Input files updated by another job"). From
that this module rebuilds each job's duration and the job graph (a job depends on another when one of
its inputs is one of the other's outputs, or lies inside an output directory), and answers the
question a time budget needs first: is the run bound by its total work (job-seconds / cores) or by its
longest chain of dependent jobs (the critical path)? No scheduling or merging of jobs can bring a run
below either bound. Timestamps have one-second resolution, so durations of very short jobs are coarse.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_TS = re.compile(r"^\[(\w{3} \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]\s*$")
_RULE = re.compile(r"^(?:local)?rule (\S+):\s*$")
_MSG = re.compile(r"^Job (\d+): ")  # a rule with `message:` prints this instead of its input/output block
_FIELD = re.compile(r"^\s+(input|output|jobid|wildcards|reason): (.*)$")
_REASON = re.compile(r"^Reason: (.*)$")
_UPDATED = re.compile(r"Input files updated by another job: ([^;]*)")
_DONE = re.compile(r"^Finished jobid: (\d+)(?: \(Rule: (\S+)\))?")


@dataclass
class Job:
    jobid: int
    rule: str
    start: datetime
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    wildcards: str = ""
    end: datetime | None = None
    preds: list[int] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        if self.end is None:
            raise ValueError(f"job {self.jobid} ({self.rule}) never finished")
        return (self.end - self.start).total_seconds()

    @property
    def label(self) -> str:
        return f"{self.rule}[{self.wildcards}]" if self.wildcards else self.rule


def _paths(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(", ") if p.strip())


def parse_log(lines: Iterable[str]) -> dict[int, Job]:
    """Jobs of one Snakemake run by jobid; `end` is None for a job that started but never finished."""
    jobs: dict[int, Job] = {}
    ts: datetime | None = None
    pending: dict[str, Any] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None and "jobid" in pending:
            j = int(pending["jobid"])
            inputs = tuple(dict.fromkeys(pending.get("input", ()) + pending.get("updated", ())))
            jobs[j] = Job(j, pending["rule"], pending["start"], inputs, pending.get("output", ()),
                          pending.get("wildcards", ""))
        pending = None

    def reason(value: str) -> None:
        if pending is not None and (u := _UPDATED.search(value)):
            pending["updated"] = _paths(u.group(1))

    for raw in lines:
        line = raw.rstrip("\n")
        if m := _TS.match(line):
            flush()
            ts = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := _RULE.match(line):
            flush()
            if ts is None:
                raise ValueError(f"rule {m.group(1)} before any timestamp: not a Snakemake log")
            pending = {"rule": m.group(1), "start": ts}
        elif m := _MSG.match(line):
            flush()
            if ts is None:
                raise ValueError(f"job {m.group(1)} before any timestamp: not a Snakemake log")
            pending = {"rule": "", "start": ts, "jobid": m.group(1)}  # the rule name comes with `Finished`
        elif pending is not None and (m := _FIELD.match(line)):
            key, value = m.groups()
            if key == "reason":
                reason(value)
            else:
                pending[key] = _paths(value) if key in ("input", "output") else value.strip()
        elif pending is not None and (m := _REASON.match(line)):
            reason(m.group(1))
        elif m := _DONE.match(line):
            flush()
            j = int(m.group(1))
            if j in jobs and ts is not None:
                jobs[j].end = ts
                if m.group(2) and not jobs[j].rule:
                    jobs[j].rule = m.group(2)
        elif pending is not None and not line.startswith(" "):
            flush()
    flush()
    _link(jobs)
    return jobs


def _link(jobs: dict[int, Job]) -> None:
    """Fill `preds`: job b depends on job a when an input of b is (inside) an output of a."""
    producers: dict[str, int] = {}
    for j in jobs.values():
        for o in j.outputs:
            producers[o.rstrip("/")] = j.jobid
    for j in jobs.values():
        found = set()
        for i in j.inputs:
            parts = i.rstrip("/").split("/")
            for k in range(len(parts), 0, -1):  # the path itself, then each enclosing directory
                p = producers.get("/".join(parts[:k]))
                if p is not None and p != j.jobid:
                    found.add(p)
                    break
        j.preds = sorted(found)


def critical_path(jobs: dict[int, Job]) -> tuple[float, list[Job]]:
    """Longest chain of finished, dependent jobs by summed duration: (seconds, jobs in order)."""
    done = {k: j for k, j in jobs.items() if j.end is not None}
    best: dict[int, float] = {}
    back: dict[int, int | None] = {}
    for j in sorted(done.values(), key=lambda x: (x.start, x.jobid)):  # producers start before consumers
        prev = [(best[p], p) for p in j.preds if p in best]
        top = max(prev) if prev else (0.0, None)
        best[j.jobid] = top[0] + j.seconds
        back[j.jobid] = top[1]
    if not best:
        return 0.0, []
    end = max(best, key=lambda k: (best[k], -k))
    chain: list[Job] = []
    cur: int | None = end
    while cur is not None:
        chain.append(done[cur])
        cur = back[cur]
    return best[end], chain[::-1]


def summarize(jobs: dict[int, Job], cores: int) -> dict[str, Any]:
    """Makespan, job-seconds, the two lower bounds on wall time, per-rule totals and the critical path."""
    if cores < 1:
        raise ValueError("cores must be >= 1")
    done = [j for j in jobs.values() if j.end is not None]
    if not done:
        raise ValueError("no finished job in the log")
    per_rule: dict[str, list[float]] = defaultdict(list)
    for j in done:
        per_rule[j.rule].append(j.seconds)
    job_s = sum(j.seconds for j in done)
    cp_s, chain = critical_path(jobs)
    makespan = (max(j.end for j in done) - min(j.start for j in done)).total_seconds()
    work_bound = job_s / cores
    return {
        "jobs_finished": len(done),
        "jobs_unfinished": sorted(j.jobid for j in jobs.values() if j.end is None),
        "makespan_s": makespan,
        "job_seconds": job_s,
        "cores": cores,
        "work_bound_s": work_bound,
        "critical_path_s": cp_s,
        "bound_by": "critical path" if cp_s > work_bound else "total work",
        "critical_path": [{"jobid": j.jobid, "job": j.label, "seconds": j.seconds} for j in chain],
        "per_rule": {r: {"n": len(v), "seconds": sum(v), "max_s": max(v)}
                     for r, v in sorted(per_rule.items(), key=lambda kv: -sum(kv[1]))},
    }


def to_markdown(s: dict[str, Any]) -> str:
    out = [f"makespan {s['makespan_s']:.0f} s; {s['jobs_finished']} jobs, {s['job_seconds']:.0f} job-s; "
           f"work bound {s['job_seconds']:.0f} / {s['cores']} cores = {s['work_bound_s']:.0f} s; "
           f"critical path {s['critical_path_s']:.0f} s: bound by {s['bound_by']}", "",
           "| rule | jobs | job-s | longest s |", "|---|---|---|---|"]
    out += [f"| {r} | {v['n']} | {v['seconds']:.0f} | {v['max_s']:.0f} |" for r, v in s["per_rule"].items()]
    out += ["", "critical path: " + " → ".join(f"{c['job']} {c['seconds']:.0f} s" for c in s["critical_path"])]
    if s["jobs_unfinished"]:
        out.append(f"unfinished jobs: {s['jobs_unfinished']}")
    return "\n".join(out)
