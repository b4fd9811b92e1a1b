"""Study summaries: each study writes `summary.md` whose manifest carries its claims table;
`results/summary.md` is built from those manifests only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from paperflow.core.io import Stage, read_manifest, write_text

Verdict = Literal["held", "did not hold", "partly", "not testable at this scale"]


@dataclass
class Claim:
    claim: str  # the paper's claim (or the spec's acceptance item), in words
    measured: str  # our number(s), as measured, with seeds / s.e. where relevant
    verdict: Verdict
    source: str = "paper"  # paper | spec | recon

    def row(self) -> str:
        return f"| {self.claim} | {self.measured} | {self.verdict} |"


def claims_table(claims: Sequence[Claim]) -> str:
    lines = ["| claim | measured here | verdict |", "|---|---|---|"]
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
    rows = ["| study | claim | measured here | verdict |", "|---|---|---|---|"]
    for s in summaries:
        man = read_manifest(s)
        for c in man["metrics"]["claims"]:
            rows.append(f"| [{man['study']}]({Path(s).relative_to(Path(out).parent)}) | {c['claim']} | "
                        f"{c['measured']} | {c['verdict']} |")
    text = ("# paperflow — results summary\n\nBuilt from each study's summary manifest; every number was "
            "measured by this run. Per-study details: the linked summaries.\n\n" + "\n".join(rows) + "\n")
    with Stage("report.summary", config={"summaries": [str(s) for s in summaries]}, outputs=[out], inputs=summaries):
        write_text(out, text)
