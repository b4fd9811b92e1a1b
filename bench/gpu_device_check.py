"""Device check to run by hand where a CUDA GPU exists (no GPU on the dev machine; the tests check the
device plumbing on CPU with torch's meta device). Exits non-zero when CUDA is missing or a check fails.

    OMP_NUM_THREADS=4 python bench/gpu_device_check.py
"""

from __future__ import annotations

import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing checked", file=sys.stderr)
        return 2
    from paperflow.quantization.e2m import e2m_gptq

    g = torch.Generator().manual_seed(0)
    W = torch.randn(16, 70, generator=g) * 0.05
    X = torch.randn(200, 70, generator=torch.Generator().manual_seed(1)) + 0.2
    H = (X.T @ X / 200).to(torch.float64)
    ref = e2m_gptq(W, H, block=32)
    rec = e2m_gptq(W.cuda(), H.cuda(), block=32)
    on_cuda = rec.t.is_cuda and rec.mu.is_cuda and rec.alpha.is_cuda
    agree = float((rec.t.cpu() == ref.t).float().mean())  # float64 on both; codes may flip at ties
    print(f"quantization e2m_gptq: outputs on CUDA {on_cuda}; ternary codes equal to CPU {agree:.4f}")
    return 0 if on_cuda and agree > 0.95 else 1


if __name__ == "__main__":
    raise SystemExit(main())
