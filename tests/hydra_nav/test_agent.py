import numpy as np

from paperflow.hydra_nav.agent import (FEATURES, Always, Every, Logistic, Navigator, Never, Stagnation, make_trigger,
                                       run_episode)
from paperflow.hydra_nav.env import FREE_SEEN, STOP, UNKNOWN, WALL_SEEN, HydraNavEnv
from paperflow.hydra_nav.house import CATEGORIES, ROOM_TYPES


def _obs(occ, rooms=None, objects=None):
    n = occ.shape[0]
    return {"occupancy": occ, "rooms": rooms if rooms is not None else np.full((n, n), -1, np.int8),
            "objects": objects if objects is not None else np.full((n, n), -1, np.int8)}


def test_fast_controller_walks_to_a_seen_goal_and_stops_next_to_it():
    occ = np.full((7, 7), FREE_SEEN, np.int8)
    occ[0, :] = occ[-1, :] = occ[:, 0] = occ[:, -1] = WALL_SEEN
    objects = np.full((7, 7), -1, np.int8)
    objects[5, 5] = 0
    nav = Navigator(goal=0, lam=8.0)
    nav.update(_obs(occ, objects=objects), 1)
    pos, rng, steps = (1, 1), np.random.default_rng(0), 0
    moves = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}
    while (a := nav.fast_action(pos, rng)) != STOP:
        pos = (pos[0] + moves[a][0], pos[1] + moves[a][1])
        steps += 1
    assert max(abs(pos[0] - 5), abs(pos[1] - 5)) == 1 and steps == 6  # Manhattan distance to the ring


def test_slow_planner_prefers_the_frontier_in_the_room_whose_type_fits_the_goal():
    # a corridor row 3 of free cells; unknown above the left end (a bathroom) and above the right end (a bedroom)
    occ = np.full((7, 9), WALL_SEEN, np.int8)
    occ[3, 1:8] = FREE_SEEN
    occ[2, 1] = occ[2, 7] = UNKNOWN
    rooms = np.full((7, 9), -1, np.int8)
    rooms[3, 1:4] = ROOM_TYPES.index("bathroom")
    rooms[3, 5:8] = ROOM_TYPES.index("bedroom")
    for goal, want in (("bed", (3, 7)), ("toilet", (3, 1))):
        nav = Navigator(goal=CATEGORIES.index(goal), lam=8.0)
        nav.update(_obs(occ, rooms=rooms), 1)
        assert nav.slow_plan((3, 4), np.zeros(occ.shape, np.int32)) == want


def test_triggers():
    f = np.zeros(len(FEATURES))
    rng = np.random.default_rng(0)
    assert not Never()(f, 0, rng) and Always()(f, 3, rng)
    assert [Every(5)(f, t, rng) for t in range(6)] == [True, False, False, False, False, True]
    stag = Stagnation(4)
    assert not stag(f, 0, rng)
    assert stag(np.array([4, 0, 0, 0, 0, 0.0]), 0, rng) and stag(np.array([0, 0, 0, 0, 1, 0.0]), 0, rng)
    lg = Logistic(np.zeros(6), -50.0, np.zeros(6), np.ones(6))
    assert not any(lg(f, t, rng) for t in range(100))
    assert isinstance(make_trigger({"kind": "logistic", "model": lg.to_dict()}), Logistic)


def test_episode_counts_and_slow_calls_help_on_average(small_dataset):
    env = HydraNavEnv(small_dataset, max_steps=200)
    res = [run_episode(env, i, Always(), np.random.default_rng(i), lam=8.0, stag_m=4, keep_steps=True)
           for i in range(len(small_dataset["episodes"]))]
    for r in res:
        assert r.slow_calls == len(r.labels) == r.labels.sum() <= r.decisions
        assert r.moves <= r.decisions and r.feats.shape == (len(r.labels), len(FEATURES))
        assert r.stagnation_calls <= r.slow_calls
        if r.success:
            assert r.moves >= r.geodesic
    none = [run_episode(env, i, Never(), np.random.default_rng(i), lam=8.0, stag_m=4)
            for i in range(len(small_dataset["episodes"]))]
    assert all(r.slow_calls == 0 for r in none)


def test_rollouts_are_deterministic_given_the_seed(small_dataset):
    from paperflow.hydra_nav.agent import RandomTrigger

    env = HydraNavEnv(small_dataset, max_steps=120)
    runs = [[run_episode(env, i, RandomTrigger(0.3), np.random.default_rng([7, i]), lam=8.0, stag_m=4).record()
             for i in range(3)] for _ in range(2)]
    assert runs[0] == runs[1]
