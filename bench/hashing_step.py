"""Benchmark (run by hand): training-step time per method and mAP@all evaluation time.

    OMP_NUM_THREADS=1 python bench/hashing_step.py [--hidden 256] [--bits 64] [--steps 30] [--n-eval 4000]

Prints ms per optimisation step (batch 64, tiny-tier encoder sizes) for every method, and the
seconds one direction of mAP@all takes at n_eval queries x n_eval database items (XMediaNet test
size 4000). Results are recorded in src/paperflow/hashing/README.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from paperflow.core.config import validate_config
from paperflow.hashing import model as M
from paperflow.hashing.evaluate import map_at_all
from paperflow.hashing.methods import METHODS, Batch, ordered


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--n-eval", type=int, default=4000)
    a = ap.parse_args()
    torch.manual_seed(0)
    x1, x2 = torch.randn(64, 512), torch.randn(64, 300)
    y = torch.nn.functional.one_hot(torch.randint(0, 20, (64,)), 20)
    idx = torch.arange(64)
    cfg = validate_config({"hashing": {"enabled": True}})["hashing"]  # the tiny tier's method parameters
    for method in ordered():
        m = METHODS[method]
        mp = m.params(cfg)
        cand = m.grid(mp)[0]
        net = M.HashNet(512, 300, a.hidden, a.bits, 20, 0)
        opt = torch.optim.Adam(net.parameters(), 3e-4)
        for epoch in (1, 10):  # warm-up phase and main phase
            t = time.perf_counter()
            for _ in range(a.steps):
                z1, z2 = net(x1, x2)
                loss = m.loss(Batch(epoch, z1, z2, y, idx, net.W, mp, False, cand, torch.ones(64, dtype=torch.bool)))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                opt.step()
            print(f"{method:13s} epoch-phase {'warm' if epoch == 1 else 'main'}: "
                  f"{(time.perf_counter() - t) / a.steps * 1e3:.1f} ms/step")
    rng = np.random.default_rng(0)
    n = a.n_eval
    q = np.packbits(rng.random((n, 128)) < 0.5, axis=1)
    lab = np.eye(200, dtype=np.uint8)[rng.integers(0, 200, n)]
    t = time.perf_counter()
    map_at_all(q, q, lab, lab, 128)
    print(f"mAP@all {n} x {n}, 128 bits: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
