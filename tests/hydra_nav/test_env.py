import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from paperflow.hydra_nav.env import ENV_ID, STOP, UNKNOWN, WALL_SEEN, HydraNavEnv, line_of_sight_table


def test_registered_env_passes_gymnasium_check_env(small_dataset):
    env = gym.make(ENV_ID, episodes=small_dataset, max_steps=50)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)


def test_reset_is_deterministic_given_a_seed(small_dataset):
    env = HydraNavEnv(small_dataset)
    a, _ = env.reset(seed=5)
    b, _ = env.reset(seed=5)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_walls_block_and_stop_succeeds_only_next_to_the_goal(small_dataset):
    env = HydraNavEnv(small_dataset, max_steps=1000)
    obs, _ = env.reset(options={"episode_index": 0})
    r, c = env.pos
    for a, (dr, dc) in enumerate(((-1, 0), (0, 1), (1, 0), (0, -1))):
        env.pos = (r, c)
        env.step(a)
        expect = (r, c) if env.house.walls[r + dr, c + dc] else (r + dr, c + dc)
        assert env.pos == expect
    env.pos = (r, c)
    _, rew, term, _, info = env.step(STOP)
    assert term and not info["success"] and rew == 0.0  # starts are >= min_geodesic away
    env.reset(options={"episode_index": 0})
    cell = tuple(np.argwhere(env.region)[0])
    env.pos = cell
    _, rew, term, _, info = env.step(STOP)
    assert term and info["success"] and rew == 1.0


def test_truncates_at_the_step_limit(small_dataset):
    env = HydraNavEnv(small_dataset, max_steps=3)
    env.reset(options={"episode_index": 1})
    outs = [env.step(0) for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True]


def test_line_of_sight_stops_at_walls_and_reveals_room_types(small_dataset):
    env = HydraNavEnv(small_dataset)
    env.reset(options={"episode_index": 2})
    occ = env.occupancy
    r, c = env.pos
    seen = np.argwhere(occ != UNKNOWN)
    assert ((seen[:, 0] - r) ** 2 + (seen[:, 1] - c) ** 2 <= 9).all()
    # a cell two steps behind a wall in a straight line is never seen
    offs, mids = line_of_sight_table(3)
    for (dr, dc), m in zip(offs, mids):
        cells = [(r + a, c + b) for a, b in m if (a, b) != (0, 0)]
        if any(env.house.walls[x] for x in cells if 0 <= x[0] < env.size and 0 <= x[1] < env.size):
            tr, tc = r + dr, c + dc
            if 0 <= tr < env.size and 0 <= tc < env.size:
                assert occ[tr, tc] == UNKNOWN
    assert (occ[env.house.walls & (occ != UNKNOWN)] == WALL_SEEN).all()
    rid = env.house.room_id[r, c]
    if rid >= 0:
        assert (env.rooms[env.house.room_id == rid] == env.house.room_type[rid]).all()
    unseen_rooms = [k for k in range(len(env.house.room_type))
                    if not (env.house.room_id == k)[occ != UNKNOWN].any()]
    for k in unseen_rooms:
        assert (env.rooms[env.house.room_id == k] == -1).all()


def test_invalid_action_raises(small_dataset):
    env = HydraNavEnv(small_dataset)
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(7)
