"""Seeding: one integer seed per job, expanded into independent streams by name."""

from __future__ import annotations

import random
import sys
import zlib

import numpy as np


def stream(seed: int, *keys: int | str) -> np.random.Generator:
    """An independent numpy Generator for (seed, *keys); strings are hashed stably (crc32)."""
    ints = [seed] + [k if isinstance(k, int) else zlib.crc32(k.encode()) for k in keys]
    return np.random.default_rng(ints)


def seed_everything(seed: int, *, torch: bool = True) -> None:
    """Seed python, numpy's legacy global RNG and torch.

    torch is imported here when it is installed: a stage that seeds first and imports torch later
    (lazily, through transformers or its model module) would otherwise build its model from torch's
    default generator, which torch seeds at random in every process, so the same job gave other weights
    on every run. `torch=False` (numpy-only stages) seeds torch only if it is already imported."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    mod = sys.modules.get("torch")
    if mod is None and torch:
        try:  # optional: numpy-only environments have no torch (and then nothing of torch to seed)
            import torch as mod  # noqa: PLC0415  (deliberately lazy: see the docstring)
        except ImportError:
            mod = None
    if mod is not None:
        mod.manual_seed(seed)
        set_deterministic(mod)


def set_deterministic(torch) -> None:  # noqa: ANN001  (the torch module, passed in: this file never imports it)
    """`torch.use_deterministic_algorithms(True, warn_only=True)` without its import of torch._inductor.

    The public call also sets `torch._inductor.config.deterministic` (only torch.compile reads it), and
    importing torch._inductor/_dynamo costs ≈ 1.5 s (≈ 5 CPU-s under load) in every job that seeds torch.
    No stage uses torch.compile; if inductor is already loaded, its flag is set too.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # a torch without the private setter: the public call
        torch.use_deterministic_algorithms(True, warn_only=True)
        return
    setter(True, warn_only=True)
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.deterministic = True
