"""Are two runs of the pipeline the same? Compare every output of run directory A with run directory B.

    python bench/compare_runs.py RUN_A RUN_B [--timing REGEX]

Run by hand after two runs of the same config from empty directories (e.g. two `snakemake all --cores 1
--configfile config/test.yaml` in two `git archive` copies). For every manifest under data/, models/ and
results/ (`*.manifest.json`) the recorded output digest is compared; for each output that differs:
JSON files are compared field by field and fields whose path matches the timing pattern (wall times,
runtimes, throughput) are set aside; safetensors files are compared tensor by tensor and by metadata;
anything else is listed. Exit status 1 when any difference other than a timing field remains.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TIMING = r"(time|seconds|wall|runtime|_s\b|_s\[|_s_|per_s|fps|frames_per)"


def _walk(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            yield from _walk(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _walk(x, y, f"{path}[{i}]")
    elif a != b and not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
        yield path, a, b


def _files(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else [out]


def _compare_file(fa: Path, fb: Path, timing: re.Pattern) -> tuple[str, list[str]]:
    """(kind, differences other than timing fields) for two files that are not byte-identical."""
    if not fb.exists():
        return "missing", [f"{fb} missing"]
    if fa.suffix == ".json":
        try:
            a, b = json.loads(fa.read_text()), json.loads(fb.read_text())
        except ValueError:
            return "json?", ["unparsable"]
        return "json", [f"{p}: {str(x)[:40]} != {str(y)[:40]}" for p, x, y in _walk(a, b) if not timing.search(p)]
    if fa.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(fa), "np") as x, safe_open(str(fb), "np") as y:
            diffs = [] if x.metadata() == y.metadata() else ["metadata"]
            keys = set(x.keys())
            if keys != set(y.keys()):
                return "safetensors", [*diffs, "tensor names"]
            diffs += [k for k in sorted(keys) if not (x.get_tensor(k).tobytes() == y.get_tensor(k).tobytes())]
        return "safetensors", diffs or ["same tensors and metadata, other header bytes"]
    return "other", ["bytes"]


def compare(a: Path, b: Path, timing: str = TIMING) -> dict[str, Any]:
    pat = re.compile(timing, re.I)
    manifests = [m for top in ("data", "models", "results") for m in sorted((a / top).rglob("*.manifest.json"))]
    report: dict[str, Any] = {"manifests": len(manifests), "digest_differs": 0, "timing_only": [], "differs": {}}
    for m in manifests:
        rel = m.relative_to(a)
        mb = b / rel
        if not mb.exists():
            report["differs"][str(rel)] = ["manifest missing in B"]
            continue
        da, db = json.loads(m.read_text()), json.loads(mb.read_text())
        if da.get("output_sha256") == db.get("output_sha256"):
            continue
        report["digest_differs"] += 1
        out = Path(str(m)[: -len(".manifest.json")])
        problems: list[str] = []
        for fa in _files(out):
            fb = b / fa.relative_to(a)
            if fb.exists() and fa.read_bytes() == fb.read_bytes():
                continue
            kind, diffs = _compare_file(fa, fb, pat)
            problems += [f"{fa.relative_to(a)} ({kind}): {d}" for d in diffs[:5]]
        if problems:
            report["differs"][str(rel)] = problems
        else:
            report["timing_only"].append(str(rel))
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--timing", default=TIMING, help="regex of JSON field paths that hold timings")
    ns = ap.parse_args(argv)
    r = compare(ns.a, ns.b, ns.timing)
    print(f"{r['manifests']} manifests; {r['digest_differs']} outputs differ by digest; "
          f"{len(r['timing_only'])} of them only in timing fields; {len(r['differs'])} otherwise")
    for rel, problems in r["differs"].items():
        print(f"- {rel}")
        for p in problems:
            print(f"    {p}")
    return 1 if r["differs"] else 0


if __name__ == "__main__":
    sys.exit(main())
