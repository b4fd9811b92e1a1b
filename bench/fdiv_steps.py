"""CPU (process) and wall milliseconds per training step of each fdiv model (run by hand; results go in src/paperflow/fdiv/README.md).

    OMP_NUM_THREADS=1 python bench/fdiv_steps.py [--steps 200]
"""

from __future__ import annotations

import argparse
import time

from paperflow.fdiv import gmm, hypergrid

GMM = dict(n_modes=8, radius=5.0, sigma=0.3, weights="equal", log_z_offset=3.0, grid=64, extent=7.0, proposal_std=6.0,
           stale_lag=20, batch_size=256, eval_every=10**9, n_curve_samples=100, n_eval_samples=100, lr_logz=0.1,
           flow={})
HG = dict(height=8, ndim=2, r0=1e-3, r1=0.5, r2=2.0, hidden=64, layers=2, lr=1e-3, lr_logz=0.1, eps=0.1,
          batch_size=64, eval_every=10**9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    rows = []
    for model, lr in (("gaussian", 5e-3), ("tabular", 0.3), ("flow", 1e-3)):
        for loss in ("rkl", "js"):
            t, c = time.perf_counter(), time.process_time()
            gmm.train_one(dict(GMM, model=model, loss=loss, lr=lr, steps=a.steps), "onpolicy", 0)
            rows.append((f"gmm/{model}", loss, (time.process_time() - c) / a.steps, (time.perf_counter() - t) / a.steps))
    for loss in ("rkl", "js"):
        t, c = time.perf_counter(), time.process_time()
        hypergrid.train_one(dict(HG, loss=loss, steps=a.steps), "onpolicy", 0)
        rows.append(("hypergrid 8x8", loss, (time.process_time() - c) / a.steps, (time.perf_counter() - t) / a.steps))
    print("| model | loss | CPU ms / step | wall ms / step |\n|---|---|---|---|")
    for m, loss, cpu, wall in rows:
        print(f"| {m} | {loss} | {1000 * cpu:.2f} | {1000 * wall:.2f} |")


if __name__ == "__main__":
    main()
