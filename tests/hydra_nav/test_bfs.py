from collections import deque

import numpy as np

from paperflow.hydra_nav.bfs import UNREACHED, chebyshev_ball, distance_field, downhill


def reference_bfs(passable, sources):
    h, w = passable.shape
    dist = np.full((h, w), UNREACHED, np.int32)
    q = deque()
    for r, c in np.argwhere(sources):
        dist[r, c] = 0
        q.append((r, c))
    while q:
        r, c = q.popleft()
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and passable[rr, cc] and dist[rr, cc] == UNREACHED:
                dist[rr, cc] = dist[r, c] + 1
                q.append((rr, cc))
    return dist


def test_distance_field_matches_a_queue_bfs_on_random_grids():
    rng = np.random.default_rng(0)
    for _ in range(30):
        passable = rng.random((12, 15)) > 0.3
        sources = np.zeros_like(passable)
        for r, c in rng.integers(0, [12, 15], size=(int(rng.integers(1, 4)), 2)):
            sources[r, c] = True
        assert np.array_equal(distance_field(passable, sources), reference_bfs(passable, sources))


def test_until_stops_early_but_keeps_every_nearer_distance_exact():
    passable = np.ones((20, 20), bool)
    src = np.zeros_like(passable)
    src[0, 0] = True
    full = distance_field(passable, src)
    part = distance_field(passable, src, until=(3, 2))
    assert part[3, 2] == 5 and part[19, 19] == UNREACHED
    reached = part >= 0
    assert np.array_equal(part[reached], full[reached]) and reached.sum() < full.size


def test_downhill_walks_the_shortest_path_around_a_wall():
    passable = np.ones((5, 5), bool)
    passable[1:4, 2] = False  # a wall between start and goal
    goal = np.zeros_like(passable)
    goal[2, 4] = True
    dist = distance_field(passable, goal)
    pos, moves = (2, 0), 0
    step = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}
    while pos != (2, 4):
        a = downhill(dist, pos, np.random.default_rng(moves))
        assert a is not None
        pos = (pos[0] + step[a][0], pos[1] + step[a][1])
        assert passable[pos]
        moves += 1
    assert moves == dist[2, 0] == 8


def test_chebyshev_ball_includes_diagonals():
    m = np.zeros((5, 5), bool)
    m[2, 2] = True
    assert chebyshev_ball(m, 1).sum() == 9 and chebyshev_ball(m, 2).sum() == 25
