"""LAC (spec §4): per linear and bit-width, the activation clip ratio p minimising
Σ‖W Q_p(x) − W x‖² over calibration tokens, with the layer's quantized weight."""

from __future__ import annotations

import numpy as np
import torch

from paperflow.quantization.ops import act_quant
from paperflow.quantization.qmodel import model_device, qlinears


@torch.no_grad()
def calibrate_clips(model, windows: torch.Tensor, bits: list[int], grid: list[float], batch: int = 8) -> dict:
    """{linear: {bits: best p}} from one A16 pass over `windows` (inputs after rotation). The errors
    are computed on the model's device and summed on the host in float64 (numpy), as before."""
    lins = qlinears(model)
    dev = model_device(model)
    errs = {n: np.zeros((len(bits), len(grid))) for n in lins}

    def make(name, lin):
        def hook(x):
            x2 = x.reshape(-1, x.shape[-1])
            y = x2 @ lin.weight.T
            for a, b in enumerate(bits):
                for c, p in enumerate(grid):
                    errs[name][a, c] += float(((act_quant(x2, b, p) @ lin.weight.T - y) ** 2).sum())
        return hook

    for n, lin in lins.items():
        lin.act_bits = 16
        lin.input_hook = make(n, lin)
    try:
        for s in range(0, windows.shape[0], batch):
            model(windows[s:s + batch].to(dev), use_cache=False)
    finally:
        for lin in lins.values():
            lin.input_hook = None
    return {n: {int(b): float(grid[int(np.argmin(e[a]))]) for a, b in enumerate(bits)} for n, e in errs.items()}
