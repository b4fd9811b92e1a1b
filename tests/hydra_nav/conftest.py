import pytest

SMALL = {"size": 16, "rooms": [3, 4], "door_width": [1, 2], "min_room_side": 3, "objects_per_room": [1, 3],
         "instances": [1, 2], "min_geodesic": 4}


@pytest.fixture(scope="module")
def small_dataset():
    from paperflow.hydra_nav.house import make_episodes

    return make_episodes(SMALL, 6, "test", 0)
