"""Progress bars for long loops. Output goes to stderr, which rules redirect into their log."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress(it: Iterable[T], desc: str, total: int | None = None, every_s: float = 5.0) -> Iterator[T]:
    """tqdm over `it`; updates at most every `every_s` seconds when not on a terminal (log files).

    PAPERFLOW_PROGRESS=0 disables it.
    """
    disable = os.environ.get("PAPERFLOW_PROGRESS", "1") == "0"
    mininterval = 0.2 if sys.stderr.isatty() else every_s
    yield from tqdm(it, desc=desc, total=total, mininterval=mininterval, disable=disable, file=sys.stderr,
                    dynamic_ncols=True)


# ---- per-study progress of a whole workflow run (`make run`) ------------------------------------------
# Snakemake reports progress per job ("123 of 400 steps"); a user running every study wants to know
# which study is running and how far it is. The Snakefile's onstart hook prints the plan per study and
# each study's summary rule announces, when it starts, that the study's jobs are all done.


def study_of_rule(rule: str, studies: Iterable[str]) -> str:
    """The study a rule belongs to: the longest study name `s` with `rule == s` or `rule` starting `s_`.
    Rules of no study (e.g. `summary_all`, `all`) belong to "(shared)"."""
    best = ""
    for s in studies:
        if (rule == s or rule.startswith(s + "_")) and len(s) > len(best):
            best = s
    return best or "(shared)"


def study_job_counts(rules: Iterable[str], studies: Iterable[str]) -> dict[str, int]:
    """Jobs per study, from the rule name of every job that will run (one entry per job)."""
    names = list(studies)
    counts: dict[str, int] = {}
    for r in rules:
        s = study_of_rule(r, names)
        counts[s] = counts.get(s, 0) + 1
    return counts


def format_plan(counts: dict[str, int], order: Iterable[str]) -> str:
    """One line per study in `order` (studies with no job to run say so), then the shared jobs and the
    total: what a user sees once, before the first job starts."""
    lines = ["paperflow: jobs to run per study"]
    known = list(order)
    width = max([len(s) for s in known + list(counts)] + [8])
    for s in known:
        n = counts.get(s, 0)
        lines.append(f"  {s:<{width}}  {n:>5}" + ("" if n else "  (up to date)"))
    for s in sorted(set(counts) - set(known)):
        lines.append(f"  {s:<{width}}  {counts[s]:>5}")
    lines.append(f"  {'total':<{width}}  {sum(counts.values()):>5}")
    return "\n".join(lines)


def summary_message(study: str, summary: str) -> str:
    """What Snakemake prints when a study's summary job starts (every other job of the study is done)."""
    return f"paperflow: {study} — all its jobs are done; writing {summary}"
