"""Benchmark (run by hand): BLCE vs the design-based batched baselines at large K.

    OMP_NUM_THREADS=1 python bench/bandits_runtime.py [--K 1000] [--d 5] [--T 10000] [--seeds 3]

Times only the policies' decision + update work (context generation excluded), reports mean ± s.e.
over seeds of per-round time and final regret, and the speed-up of BLCE over each baseline.
Goal from the issue: BLCE ≥ 10× faster than the design-based batched baseline at comparable regret.
Results are recorded in src/paperflow/bandits/README.md.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from paperflow.bandits.simulate import run_one

ALGOS = {
    "blce": {},
    "batch_elim_g": {},
    "blce_g (regularized ρ=1)": {"_algo": "blce_g", "design": "regularized", "rho": 1.0},
    "linucb": {},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, default=1000)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--T", type=int, default=10000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--eps", type=float, default=1.0, help="design tolerance ε for the design-based baselines")
    a = ap.parse_args()
    print(f"# K={a.K} d={a.d} T={a.T} β={a.beta} seeds={a.seeds} ε={a.eps}; {platform.processor() or platform.machine()}")
    rows = {}
    for label, p in ALGOS.items():
        p = dict(p)
        algo = p.pop("_algo", label)
        if algo in ("batch_elim_g", "blce_g"):
            p["eps"] = a.eps
        times, regs = [], []
        for s in range(a.seeds):
            r = run_one({"K": a.K, "d": a.d}, algo, {"beta": a.beta, **p}, a.T, s, {})
            times.append(r.runtime_s / a.T)
            regs.append(r.final_regret)
        rows[label] = (np.mean(times), np.std(times) / np.sqrt(len(times)), np.mean(regs), np.std(regs) / np.sqrt(len(regs)))
    print("| algorithm | µs / round | final regret | BLCE speed-up |")
    print("|---|---|---|---|")
    for label, (t, tse, r, rse) in rows.items():
        print(f"| {label} | {1e6 * t:.0f} ± {1e6 * tse:.0f} | {r:.0f} ± {rse:.0f} | {t / rows['blce'][0]:.2f}× |")


if __name__ == "__main__":
    main()
