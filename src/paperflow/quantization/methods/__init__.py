"""Weight-quantization methods, one file each, registered by name (config: quantization.methods.<run>.quantizer).

A method is `fn(model, ctx) -> records`: `model` has its decoder linears wrapped as QLinear (FP);
the method may set rotations and must replace each QLinear's weight by its dequantized
quantized weight; `records[name]` is the TernaryLayer / Int4Layer that gets packed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from paperflow.core.registry import Registry

METHODS: Registry = Registry("quantization method")


@dataclass
class MethodContext:
    options: dict[str, Any]  # the run's config entry (quantizer, rotation, weights, stage2, gptq)
    params: dict[str, Any]  # job params (e2m, kotms settings ...)
    seed: int
    calib: torch.Tensor | None = None  # [N, T] token windows (train split)
    kotms: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None  # linear -> (C, B)
    log: dict[str, Any] = field(default_factory=dict)


def _register_all() -> None:
    from paperflow.quantization.methods import rotation_only, rtn_ternary, rtn_w4a4, twla  # noqa: F401


_register_all()
