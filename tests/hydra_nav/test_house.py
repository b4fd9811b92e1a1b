import json

import numpy as np
import pytest

from paperflow.hydra_nav.bfs import distance_field
from paperflow.hydra_nav.house import (CATEGORIES, FORMAT, ROOM_TYPES, generate_house, load_episodes, make_episodes,
                                       room_prior, success_region, write_episodes)
from tests.hydra_nav.conftest import SMALL

DEFAULT = {**SMALL, "size": 32, "rooms": [4, 8], "min_room_side": 4, "min_geodesic": 8}


def test_prior_rows_are_distributions_with_a_typical_category():
    p = room_prior()
    assert p.shape == (len(ROOM_TYPES), len(CATEGORIES)) and np.allclose(p.sum(1), 1)
    assert p[ROOM_TYPES.index("bedroom"), CATEGORIES.index("bed")] > 0.5
    assert p[ROOM_TYPES.index("bathroom"), CATEGORIES.index("toilet")] > 0.5


@pytest.mark.parametrize("seed", range(8))
def test_houses_are_deterministic_connected_and_within_the_room_range(seed):
    h = generate_house(seed, DEFAULT)
    h2 = generate_house(seed, DEFAULT)
    assert np.array_equal(h.walls, h2.walls) and np.array_equal(h.objects, h2.objects)
    assert 4 <= len(h.room_type) <= 8
    assert h.walls[0].all() and h.walls[-1].all() and h.walls[:, 0].all() and h.walls[:, -1].all()
    free = ~h.walls
    src = np.zeros_like(free)
    src[tuple(np.argwhere(free)[0])] = True
    assert (distance_field(free, src)[free] >= 0).all()  # every free cell reachable through the doors
    assert ((h.objects >= 0) <= free).all()
    # door cells: free, outside every room
    assert ((h.room_id < 0) & free).sum() >= len(h.room_type) - 1


def test_episode_file_roundtrip_and_habitat_field_names(tmp_path):
    ds = make_episodes(DEFAULT, 10, "test", 3)
    write_episodes(tmp_path / "e.json", ds)
    back = load_episodes(tmp_path / "e.json")
    assert back == json.loads(json.dumps(ds))
    ep = back["episodes"][0]
    assert {"episode_id", "scene_id", "start_position", "start_rotation", "object_category", "info"} <= set(ep)
    assert set(back["category_to_task_category_id"]) == set(CATEGORIES)
    for ep in back["episodes"]:
        goals = back["goals_by_category"][ep["goals_key"]]
        assert 1 <= len(goals) <= 2 and all(g["object_category"] == ep["object_category"] for g in goals)
        h = generate_house(ep["scene_seed"], back["generator"])
        cat = CATEGORIES.index(ep["object_category"])
        assert int((h.objects == cat).sum()) == len(goals)
        d = distance_field(~h.walls, success_region(h, cat))
        assert d[tuple(ep["start_position"])] == ep["info"]["geodesic_distance"] >= DEFAULT["min_geodesic"]


def test_load_episodes_rejects_a_foreign_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"format": "ObjectNav-v1", "episodes": []}))
    with pytest.raises(ValueError, match=FORMAT):
        load_episodes(p)
    ds = make_episodes(SMALL, 2, "train", 0)
    del ds["episodes"][1]["goals_key"]
    p.write_text(json.dumps(ds))
    with pytest.raises(ValueError, match="lacks"):
        load_episodes(p)
