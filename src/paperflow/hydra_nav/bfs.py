"""Vectorised breadth-first distance fields on 4-connected boolean grids (no per-cell Python loops):
each wavefront step ORs four shifted copies of the current front, masked by passable & unreached."""

from __future__ import annotations

import numpy as np

UNREACHED = -1
# (dr, dc) of the four moves, in action order N, E, S, W
MOVES = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)


def dilate4(front: np.ndarray) -> np.ndarray:
    """Cells 4-adjacent to any True cell of `front` (no wrap-around)."""
    nb = np.zeros_like(front)
    nb[1:, :] |= front[:-1, :]
    nb[:-1, :] |= front[1:, :]
    nb[:, 1:] |= front[:, :-1]
    nb[:, :-1] |= front[:, 1:]
    return nb


def distance_field(passable: np.ndarray, sources: np.ndarray, max_steps: int | None = None,
                   until: tuple[int, int] | None = None) -> np.ndarray:
    """BFS distance (in moves) from the nearest source to every passable cell; UNREACHED elsewhere.

    Sources count even when not passable themselves (a goal set may touch walls); the wavefront spreads
    only through `passable` cells. Work per step is a handful of whole-array ops on a zero-padded copy
    (no per-cell Python loop); steps = the largest distance, or fewer: `max_steps` caps them and `until`
    stops as soon as that cell is reached (every cell nearer to the sources is then final, which is all
    that walking downhill from it needs)."""
    passable = np.asarray(passable, dtype=bool)
    src = np.asarray(sources, dtype=bool)
    h, w = passable.shape
    dist = np.full((h, w), UNREACHED, dtype=np.int32)
    dist[src] = 0
    pad = np.zeros((h + 2, w + 2), dtype=bool)
    inner = pad[1:-1, 1:-1]
    inner[...] = src
    avail = passable & ~src
    limit = passable.size if max_steps is None else int(max_steps)
    d = 0
    if until is not None and src[until]:
        return dist
    while d < limit:
        d += 1
        front = pad[:-2, 1:-1] | pad[2:, 1:-1]
        front |= pad[1:-1, :-2]
        front |= pad[1:-1, 2:]
        front &= avail
        if not front.any():
            break
        avail &= ~front
        dist[front] = d
        inner[...] = front
        if until is not None and front[until]:
            break
    return dist


def downhill(dist: np.ndarray, pos: tuple[int, int], rng: np.random.Generator | None = None) -> int | None:
    """The move (0..3) from `pos` to a neighbour with the smallest reachable distance (< dist[pos]);
    ties are broken uniformly with `rng` (first in N, E, S, W order without one). None: no such move."""
    h, w = dist.shape
    r, c = pos
    here = int(dist[r, c])
    best: list[int] = []
    best_d = here if here != UNREACHED else np.iinfo(np.int32).max
    for a in range(4):
        rr, cc = r + int(MOVES[a, 0]), c + int(MOVES[a, 1])
        if 0 <= rr < h and 0 <= cc < w:
            d = int(dist[rr, cc])
            if d == UNREACHED:
                continue
            if d < best_d:
                best, best_d = [a], d
            elif d == best_d and best:
                best.append(a)
    if not best:
        return None
    if rng is None or len(best) == 1:
        return best[0]
    return best[int(rng.integers(len(best)))]


def chebyshev_ball(cells: np.ndarray, radius: int = 1) -> np.ndarray:
    """Boolean mask of every cell within Chebyshev distance `radius` of a True cell (8-dilation)."""
    out = np.asarray(cells, dtype=bool).copy()
    for _ in range(radius):
        nb = dilate4(out)
        nb[1:, 1:] |= out[:-1, :-1]
        nb[1:, :-1] |= out[:-1, 1:]
        nb[:-1, 1:] |= out[1:, :-1]
        nb[:-1, :-1] |= out[1:, 1:]
        out |= nb
    return out
