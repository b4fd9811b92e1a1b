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


def seed_everything(seed: int) -> None:
    """Seed python, numpy's legacy global RNG and torch (if it is already imported)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
