"""Static update grids t_0 = 0 < t_1 < ... < t_M = T."""

from __future__ import annotations

import math


def default_M(T: int) -> int:
    """M = ceil(log2 log2 T) + 1 (5 for 257 <= T <= 65536, 6 up to 2^32)."""
    if T < 4:
        return 1
    return math.ceil(math.log2(math.log2(T))) + 1


def make_grid(T: int, M: int | None = None, kind: str = "geometric") -> list[int]:
    """Grid points t_1..t_M (t_0 = 0 omitted), strictly increasing, last point exactly T.

    geometric: t_m = floor(a^(2 - 2^(1-m))), a = T^(1/(2 - 2^(1-M)));
    sqrt:      t_1 = ceil(sqrt T), t_m = ceil(T^(1 - 2^-m)).
    """
    if T < 1:
        raise ValueError("T must be >= 1")
    M = default_M(T) if M is None else M
    if M < 1:
        raise ValueError("M must be >= 1")
    if kind == "geometric":
        a = T ** (1.0 / (2.0 - 2.0 ** (1 - M)))
        pts = [math.floor(a ** (2.0 - 2.0 ** (1 - m))) for m in range(1, M + 1)]
    elif kind == "sqrt":
        pts = [math.ceil(math.sqrt(T))] + [math.ceil(T ** (1 - 2.0 ** (-m))) for m in range(2, M + 1)]
    else:
        raise ValueError(f"unknown grid kind {kind!r}")
    pts[-1] = T  # floor/float error can give T-1
    # keep the grid strictly increasing (tiny T): bump duplicates forward, never past T
    out: list[int] = []
    for p in pts:
        p = max(p, (out[-1] + 1) if out else 1)
        out.append(min(p, T))
    if len(set(out)) != len(out):
        raise ValueError(f"T={T} too small for M={M} intervals")
    return out
