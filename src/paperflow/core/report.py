"""Study summaries: each study writes `summary.md` whose manifest carries its claims table;
`results/summary.md` is built from those manifests only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from paperflow.core.io import Stage, read_manifest, write_text
from paperflow.core.verdict import Outcome, Verdict

NO_PAPER_NUMBER = "no number in the paper"


@dataclass
class Claim:
    """One row of a summary's claims table. Build it with :meth:`judged` from a `core.verdict.Verdict`
    so the outcome and its one-line reason come from the shared helper."""

    claim: str  # the paper's claim (or the spec's acceptance item), in words
    measured: str  # our number(s), as measured, with seeds / s.e. / CI where relevant
    verdict: Outcome
    source: str = "paper"  # paper | spec | recon
    paper: str = NO_PAPER_NUMBER  # the paper's own number for this claim
    sample: str = ""  # what the verdict rests on: seeds, episodes, pairs ...
    reason: str = ""  # the verdict helper's one-line reason

    @classmethod
    def judged(cls, claim: str, measured: str, verdict: Verdict, *, sample: str, paper: str = NO_PAPER_NUMBER,
               source: str = "paper") -> "Claim":
        return cls(claim, measured, verdict.outcome, source, paper, sample, verdict.reason)

    def row(self) -> str:
        return (f"| {self.claim} | {self.paper} | {self.measured} | {self.sample or '—'} | **{self.verdict}** | "
                f"{self.reason or '—'} |")


def claims_table(claims: Sequence[Claim]) -> str:
    lines = ["| claim | paper | measured here | sample | verdict | why |", "|---|---|---|---|---|---|"]
    lines += [c.row() for c in claims]
    return "\n".join(lines)


def write_summary(path: str | Path, study: str, title: str, claims: Sequence[Claim], body: str,
                  config: Mapping[str, Any], inputs: Sequence[str | Path] = (), seed: int | None = None) -> None:
    """Write `summary.md` (title, claims table, free text) and its manifest holding the claims."""
    text = f"# {title}\n\n## Claims and what we measured\n\n{claims_table(claims)}\n\n{body.strip()}\n"
    with Stage(f"{study}.summary", config=config, outputs=[path], inputs=inputs, seed=seed) as st:
        write_text(path, text)
        st.metrics["claims"] = [asdict(c) for c in claims]
        st.extra["study"] = study
        st.extra["title"] = title


def aggregate(summaries: Sequence[str | Path], out: str | Path) -> None:
    rows = ["| study | claim | paper | measured here | sample | verdict |", "|---|---|---|---|---|---|"]
    for s in summaries:
        man = read_manifest(s)
        for c in man["metrics"]["claims"]:
            rows.append(f"| [{man['study']}]({Path(s).relative_to(Path(out).parent)}) | {c['claim']} | "
                        f"{c.get('paper', NO_PAPER_NUMBER)} | {c['measured']} | {c.get('sample') or '—'} | "
                        f"{c['verdict']} |")
    text = ("# paperflow — results summary\n\nBuilt from each study's summary manifest; every number was "
            "measured by this run. Per-study details: the linked summaries.\n\n" + "\n".join(rows) + "\n")
    with Stage("report.summary", config={"summaries": [str(s) for s in summaries]}, outputs=[out], inputs=summaries):
        write_text(out, text)
