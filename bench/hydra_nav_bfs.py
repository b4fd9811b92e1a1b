"""Vectorised BFS and environment throughput of the hydra_nav study (run by hand; results go in
src/paperflow/hydra_nav/README.md). CPU (process) time per call, and environment steps per CPU-second
of each trigger policy with the controllers in the loop (the tiny default's hot path).

    OMP_NUM_THREADS=1 python bench/hydra_nav_bfs.py [--episodes 40]
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import numpy as np

from paperflow.hydra_nav.agent import Always, Every, Never, Stagnation, run_episode
from paperflow.hydra_nav.bfs import UNREACHED, distance_field
from paperflow.hydra_nav.env import HydraNavEnv
from paperflow.hydra_nav.house import generate_house, make_episodes

HOUSES = {"size": 32, "rooms": [4, 8], "door_width": [1, 2], "min_room_side": 4, "objects_per_room": [1, 3],
          "instances": [1, 2], "min_geodesic": 8}


def queue_bfs(passable: np.ndarray, src: tuple[int, int]) -> np.ndarray:
    """The per-cell Python BFS the vectorised version replaces (reference for the speed-up only)."""
    h, w = passable.shape
    dist = np.full((h, w), UNREACHED, np.int32)
    dist[src] = 0
    q = deque([src])
    while q:
        r, c = q.popleft()
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and passable[rr, cc] and dist[rr, cc] == UNREACHED:
                dist[rr, cc] = dist[r, c] + 1
                q.append((rr, cc))
    return dist


def per_call(fn, n: int) -> float:
    c = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - c) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=40)
    a = ap.parse_args()
    house = generate_house(1, HOUSES)
    free = ~house.walls
    start = tuple(np.argwhere(free)[0])
    src = np.zeros_like(free)
    src[start] = True
    assert np.array_equal(distance_field(free, src), queue_bfs(free, start))
    vec = per_call(lambda: distance_field(free, src), 300)
    ref = per_call(lambda: queue_bfs(free, start), 100)
    print("| BFS, full 32×32 house from a corner | CPU µs / call |\n|---|---|")
    print(f"| vectorised wavefront (bfs.distance_field) | {1e6 * vec:.0f} |")
    print(f"| per-cell Python queue (reference) | {1e6 * ref:.0f} |")
    env = HydraNavEnv(make_episodes(HOUSES, a.episodes, "test", 0))
    print("\n| policy | env steps / CPU-s | ms / episode | steps / episode |\n|---|---|---|---|")
    for name, trig in (("(a) fast only", Never()), ("(b) slow every step", Always()), ("(c) every 5", Every(5)),
                       ("(d) heuristic", Stagnation(4))):
        c = time.process_time()
        res = [run_episode(env, i, trig, np.random.default_rng(i), lam=8.0, stag_m=4) for i in range(a.episodes)]
        dt = time.process_time() - c
        steps = sum(r.decisions for r in res)
        print(f"| {name} | {steps / dt:.0f} | {1000 * dt / a.episodes:.1f} | {steps / a.episodes:.0f} |")


if __name__ == "__main__":
    main()
