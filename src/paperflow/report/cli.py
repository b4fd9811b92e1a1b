from __future__ import annotations

import argparse

from paperflow.core.cli import Study

study = Study("report", "cross-study reports built from manifests")


@study.stage("summary", "aggregate study summaries into one claims table")
def _summary(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True)
    p.add_argument("summaries", nargs="*", help="each study's summary.md (its manifest is read)")

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.report import aggregate

        aggregate(a.summaries, a.out)

    return run


STUDIES = [study]
