"""Learning-rate schedules shared by every training stage."""

from __future__ import annotations

import math


def warmup_cosine(step: int, total: int, warmup: float | int, floor: float = 0.0) -> float:
    """Multiplier of the base lr at `step` (0-based): linear warm-up over `warmup` steps (a fraction of
    `total` when < 1), then cosine decay from 1 to `floor` at `total`."""
    w = int(round(warmup * total)) if isinstance(warmup, float) and warmup < 1 else int(warmup)
    if w > 0 and step < w:
        return (step + 1) / w
    span = max(1, total - w)
    prog = min(1.0, max(0.0, (step - w) / span))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * prog))


def lambda_lr(optimizer, total: int, warmup: float | int, floor: float = 0.0):  # type: ignore[no-untyped-def]
    """A torch LambdaLR with :func:`warmup_cosine` (its state_dict goes into the checkpoint)."""
    from torch.optim.lr_scheduler import LambdaLR

    return LambdaLR(optimizer, lambda s: warmup_cosine(s, total, warmup, floor))
