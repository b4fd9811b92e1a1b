"""Benchmark (by hand): CPU time of one LARA training step per variant at the tiny default size, and of
one closed-loop policy query (render + 4 Euler steps). Usage: OMP_NUM_THREADS=1 python bench/robopolicy_step.py"""

from __future__ import annotations

import time

import numpy as np
import torch

from paperflow.robopolicy import lara


def main(S: int = 64, B: int = 32, width: int = 128, n: int = 5) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    b = {"image": torch.randint(0, 255, (B, S, S, 3), generator=g, dtype=torch.uint8), "state": torch.randn(B, 7),
         "bow": torch.rand(B, len(lara.VOCAB)), "actions": torch.rand(B, 4, 7),
         "f0": torch.randint(0, 255, (B, S, S, 3), generator=g, dtype=torch.uint8),
         "f1": torch.randint(0, 255, (B, S, S, 3), generator=g, dtype=torch.uint8)}
    for variant in lara.VARIANTS:
        vla = lara.TinyVLA(H=4, d=width, head="mse" if variant == "lara_mse" else "flow")
        lam = lara.TinyLAM(S, d=width)
        opt = torch.optim.AdamW(list(vla.parameters()) + list(lam.parameters()), lr=1e-4)
        ts = []
        for _ in range(n):
            t0 = time.process_time()
            loss, _ = lara.joint_loss(vla, lam, b, variant, 0.01, 0.01)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ts.append(time.process_time() - t0)
        print(f"{variant:13s} step (B={B}, {S}^2, width {width}): {np.median(ts) * 1000:.0f} ms CPU")
    vla = lara.TinyVLA(H=4, d=width)
    one = {k: v[:1] for k, v in b.items()}
    t0 = time.process_time()
    for _ in range(20):
        vla.sample(one, 4)
    print(f"policy query (4 Euler steps): {(time.process_time() - t0) / 20 * 1000:.1f} ms CPU")


if __name__ == "__main__":
    from paperflow.core.cli import setup_threads

    setup_threads()  # the runner's one thread set-up (OMP_NUM_THREADS, default 1)
    main()
