"""CPU (process) and wall seconds per training epoch of each consmsa variant kind, and of one test-time
control evaluation, at the tiny default sizes (run by hand; results go in src/paperflow/consmsa/README.md).

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/consmsa_epoch.py [--epochs 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from paperflow.consmsa import plan
from paperflow.consmsa.data import generate
from paperflow.consmsa.train import run_split, train_variant
from paperflow.core.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    cfg = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")["consmsa"]
    data, _ = generate(plan.data_params(cfg), 0)
    for v in ("base", "full_k1", "full_k0.1"):
        p = {**plan.variant_params(cfg, v, 0), "epochs": a.epochs}
        t, c = time.perf_counter(), time.process_time()
        net, _ = train_variant(p, data["train"], 0)
        print(f"{v:10s} train: {(time.process_time() - c) / a.epochs:.2f} CPU-s/epoch, "
              f"{(time.perf_counter() - t) / a.epochs:.2f} s/epoch wall")
        if v == "full_k1" and net is not None:
            t, c = time.perf_counter(), time.process_time()
            run_split(net, p, data["test"], keep=0.1, control="cls_attn")
            print(f"{'':10s} one control on test: {time.process_time() - c:.2f} CPU-s, {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
