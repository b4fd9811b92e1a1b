"""Benchmark (run by hand): is DUS's null minority gain a matter of λ₁? (d) and (d′) at larger λ₁ vs (c).

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/video_bci_lambda.py [--lambdas 1,2] [--seeds 5]

Uses the tiny default config (config/config.yaml) and its data generator; trains racc once per seed and
dus / dus_bonus per λ₁ per seed with grpo_lite, and reports minority recovery, majority retention and accuracy
with the paired (d) − (c) minority-recovery difference (95% t CI over seeds, core.stats). Results are recorded
in src/paperflow/video_bci/README.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from paperflow.core.config import load_config
from paperflow.core.stats import paired_diff
from paperflow.video_bci.data import SPLITS, make_split
from paperflow.video_bci.train import run_arms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lambdas", default="1,2")
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    sec = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")["video_bci"]
    splits = {s: make_split(sec["data"], s, int(sec["data"][f"n_{s}"])) for s in SPLITS}
    base = {**sec["model"], **sec["rl"]}
    res: dict[str, dict[int, dict]] = {"racc": {}}
    for seed in range(a.seeds):
        res["racc"][seed] = run_arms(["racc"], base, splits, seed)["racc"]
    for lam in [float(x) for x in a.lambdas.split(",")]:
        for arm in ("dus", "dus_bonus"):
            key = f"{arm}@{lam:g}"
            res[key] = {s: run_arms([arm], {**base, "lambda_dus": lam}, splits, s)[arm] for s in range(a.seeds)}
    out = {}
    for key, per in res.items():
        row = {m: round(sum(r[m] for r in per.values()) / len(per), 3)
               for m in ("acc", "minority_recovery", "majority_retention")}
        if key != "racc":
            e = paired_diff([per[s]["minority_recovery"] for s in range(a.seeds)],
                            [res["racc"][s]["minority_recovery"] for s in range(a.seeds)])
            row["minority_minus_racc"] = [round(e.value, 3), round(e.lo, 3), round(e.hi, 3)]
        out[key] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
