"""Cross-study reports built from the study summaries' manifests (results/summary.md).

`paperflow report summary --out results/summary.md results/<study>/summary.md ...`: one table of every
claim of every enabled study, with the columns `paperflow.core.report.aggregate` writes (study, claim,
paper, measured here, sample, verdict). Each row is copied from the study's summary manifest as it is:
"not testable at this scale" and "inconclusive" verdicts appear verbatim.
"""

from __future__ import annotations

from pathlib import Path

from paperflow.core.cli import stage


@stage()
def summary(inputs: tuple[Path, ...] = (), *, out: Path) -> Path:
    """Aggregate study summaries (each study's summary.md; its manifest is read) into one claims table."""
    from paperflow.core.report import aggregate

    aggregate(list(inputs), out)
    return out
