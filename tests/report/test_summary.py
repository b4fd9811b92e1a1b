"""`paperflow report summary`: results/summary.md is built from the study summaries' manifests, with the
columns core.report.aggregate writes, and every row (not testable / inconclusive included) verbatim."""

from __future__ import annotations

from pathlib import Path

from paperflow.core.report import Claim, write_summary
from paperflow.core.verdict import INCONCLUSIVE, NOT_TESTABLE, Verdict
from paperflow.report.stages import summary

HEADER = "| study | claim | paper | measured here | sample | verdict |"


def _study(results: Path, name: str, claims: list[Claim]) -> Path:
    out = results / name / "summary.md"
    write_summary(out, name, f"{name} title", claims, "free text", config={"x": 1})
    return out


def test_summary_keeps_columns_and_untestable_inconclusive_rows_verbatim(tmp_path):
    results = tmp_path / "results"
    a = _study(results, "alpha", [
        Claim.judged("effect grows with size", "slope 0.12 [-0.05, 0.29] (n = 3 seeds)",
                     Verdict(INCONCLUSIVE, "CI covers 0"), sample="3 seeds × 200 pairs"),
        Claim.judged("beats the baseline", "baseline at chance (0.50)",
                     Verdict(NOT_TESTABLE, "baseline at chance"), sample="1 seed", paper="0.81 AUC"),
    ])
    b = _study(results, "beta", [Claim.judged("exact identity", "err 2e-15", Verdict("held", "< 1e-10"),
                                              sample="exact")])
    out = results / "summary.md"
    assert summary((a, b), out=out) == out
    text = out.read_text()
    lines = text.splitlines()
    assert HEADER in lines and lines[lines.index(HEADER) + 1] == "|---|---|---|---|---|---|"
    assert ("| [alpha](alpha/summary.md) | effect grows with size | no number in the paper | "
            "slope 0.12 [-0.05, 0.29] (n = 3 seeds) | 3 seeds × 200 pairs | inconclusive |") in lines
    assert ("| [alpha](alpha/summary.md) | beats the baseline | 0.81 AUC | baseline at chance (0.50) | 1 seed | "
            "not testable at this scale |") in lines
    assert "| [beta](beta/summary.md) | exact identity | no number in the paper | err 2e-15 | exact | held |" in lines
    rows = [ln for ln in lines if ln.startswith("| [")]
    assert len(rows) == 3  # one row per claim, in study order
    assert (out.parent / "summary.md.manifest.json").exists()


def test_summary_with_no_enabled_study_writes_an_empty_table(tmp_path):
    out = tmp_path / "summary.md"
    summary((), out=out)
    assert HEADER in out.read_text()
