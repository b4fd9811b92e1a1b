"""Houses and ObjectNav-style episodes.

A house is a `size × size` grid with an outer wall, split recursively into typed rooms by interior
walls with 1–2-cell doors; objects of 8 categories are placed in rooms by a room-type prior. Houses are
never stored: the episode file records each house's scene seed and the generator parameters, and the
environment regenerates the house from them (like Habitat's scene_id pointing at a scene asset). The
episode file follows the field names of habitat-lab's ObjectNav-v1 datasets (episodes with episode_id,
scene_id, start_position, start_rotation, object_category, info.geodesic_distance; goals stored once per
scene × category under goals_by_category["<scene>_<category>"], each goal with object_id, object_category,
position), plus our own scene_seed and room fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.hydra_nav.bfs import chebyshev_ball, distance_field

FORMAT = "paperflow.hydra_nav/ObjectNav-v1"
ROOM_TYPES: tuple[str, ...] = ("bedroom", "kitchen", "bathroom", "living", "office", "hall")
CATEGORIES: tuple[str, ...] = ("bed", "toilet", "oven", "sofa", "tv_monitor", "desk", "chair", "plant")
# P(category | room type) before row normalisation [choice]: each type has one or two typical categories
PRIOR_WEIGHTS = np.array([
    # bed  toilet oven sofa  tv    desk  chair plant
    [8.0, 0.1, 0.1, 0.5, 1.0, 0.5, 1.0, 1.0],   # bedroom
    [0.1, 0.1, 8.0, 0.2, 0.5, 0.1, 2.0, 1.0],   # kitchen
    [0.1, 8.0, 0.1, 0.1, 0.1, 0.1, 0.2, 1.0],   # bathroom
    [0.3, 0.1, 0.2, 6.0, 5.0, 0.2, 2.0, 2.0],   # living
    [0.2, 0.1, 0.1, 0.5, 1.0, 7.0, 3.0, 1.0],   # office
    [0.1, 0.1, 0.1, 0.5, 0.3, 0.2, 1.0, 3.0],   # hall
])
FREE, WALL = 0, 1
HALL = ROOM_TYPES.index("hall")


def room_prior() -> np.ndarray:
    """P(category | room type), rows sum to 1 (len(ROOM_TYPES) × len(CATEGORIES))."""
    return PRIOR_WEIGHTS / PRIOR_WEIGHTS.sum(axis=1, keepdims=True)


@dataclass
class House:
    walls: np.ndarray  # bool (size, size): True = wall
    room_id: np.ndarray  # int16 (size, size): room index of a free cell; -1 for walls and door cells
    room_type: np.ndarray  # int16 (n_rooms,): index into ROOM_TYPES
    objects: np.ndarray  # int16 (size, size): category index of the object on a cell, -1 if none
    seed: int

    @property
    def size(self) -> int:
        return int(self.walls.shape[0])

    def room_type_map(self) -> np.ndarray:
        """Room type per cell (-1 on walls and door cells)."""
        out = np.full(self.walls.shape, -1, dtype=np.int16)
        m = self.room_id >= 0
        out[m] = self.room_type[self.room_id[m]]
        return out


Rect = tuple[int, int, int, int]
Cells = list[tuple[int, int]]


def _split(rect: Rect, rng: np.random.Generator, min_side: int, doors: Cells,
           door_width: Sequence[int]) -> tuple[Rect, Rect, Cells, Cells] | None:
    """Split an interior rectangle (r0, c0, r1, c1 inclusive) by one wall line with a door; None if too small."""
    r0, c0, r1, c1 = rect
    h, w = r1 - r0 + 1, c1 - c0 + 1
    door_set = set(doors)
    options = []
    if h >= 2 * min_side + 1:
        # horizontal wall at row r: must not end on a door of the enclosing walls (left/right)
        options += [("h", r) for r in range(r0 + min_side, r1 - min_side + 1)
                    if (r, c0 - 1) not in door_set and (r, c1 + 1) not in door_set]
    if w >= 2 * min_side + 1:
        options += [("v", c) for c in range(c0 + min_side, c1 - min_side + 1)
                    if (r0 - 1, c) not in door_set and (r1 + 1, c) not in door_set]
    if not options:
        return None
    # prefer cutting across the longer side
    weights = np.array([(h if o == "h" else w) for o, _ in options], dtype=float)
    kind, at = options[int(rng.choice(len(options), p=weights / weights.sum()))]
    dw = int(rng.integers(door_width[0], door_width[1] + 1))
    if kind == "h":
        start = int(rng.integers(c0, c1 - dw + 2))
        wall_cells = [(at, c) for c in range(c0, c1 + 1)]
        door = [(at, c) for c in range(start, start + dw)]
        return (r0, c0, at - 1, c1), (at + 1, c0, r1, c1), [x for x in wall_cells if x not in door], door
    start = int(rng.integers(r0, r1 - dw + 2))
    wall_cells = [(r, at) for r in range(r0, r1 + 1)]
    door = [(r, at) for r in range(start, start + dw)]
    return (r0, c0, r1, at - 1), (r0, at + 1, r1, c1), [x for x in wall_cells if x not in door], door


def generate_house(seed: int, params: Mapping[str, Any]) -> House:
    """The house of scene seed `seed` (deterministic given `params`: size, rooms [lo, hi], door_width
    [lo, hi], min_room_side, objects_per_room [lo, hi])."""
    size = int(params["size"])
    rng = stream(int(seed), "house")
    lo, hi = (int(x) for x in params["rooms"])
    for _attempt in range(50):
        n_target = int(rng.integers(lo, hi + 1))
        walls = np.zeros((size, size), dtype=bool)
        walls[0, :] = walls[-1, :] = walls[:, 0] = walls[:, -1] = True
        rects: list[Rect] = [(1, 1, size - 2, size - 2)]
        doors: Cells = []
        while len(rects) < n_target:
            order = sorted(range(len(rects)), key=lambda i: -((rects[i][2] - rects[i][0] + 1) *
                                                              (rects[i][3] - rects[i][1] + 1)))
            for i in order:
                res = _split(rects[i], rng, int(params["min_room_side"]), doors, params["door_width"])
                if res is not None:
                    a, b, wall_cells, door_cells = res
                    for cell in wall_cells:
                        walls[cell] = True
                    doors += door_cells
                    rects[i:i + 1] = [a, b]
                    break
            else:
                break
        if len(rects) < lo:
            continue
        room_id = np.full((size, size), -1, dtype=np.int16)
        for k, (r0, c0, r1, c1) in enumerate(rects):
            room_id[r0:r1 + 1, c0:c1 + 1] = k
        room_id[walls] = -1
        for d in doors:
            room_id[d] = -1
        free = ~walls
        start = np.zeros_like(free)
        start[np.argwhere(free)[0][0], np.argwhere(free)[0][1]] = True
        if (distance_field(free, start)[free] < 0).any():
            continue  # a door ended up blocked: resample
        n = len(rects)
        room_type = rng.integers(0, len(ROOM_TYPES), size=n).astype(np.int16)
        objects = np.full((size, size), -1, dtype=np.int16)
        prior = room_prior()
        olo, ohi = (int(x) for x in params["objects_per_room"])
        for k in range(n):
            cells = np.argwhere(room_id == k)
            m = min(int(rng.integers(olo, ohi + 1)), len(cells))
            cats = rng.choice(len(CATEGORIES), size=m, p=prior[room_type[k]])
            where = rng.choice(len(cells), size=m, replace=False)
            for cat, j in zip(cats, where, strict=True):
                objects[tuple(cells[j])] = int(cat)
        return House(walls, room_id, room_type, objects, int(seed))
    raise RuntimeError(f"house generator: no valid house for seed {seed} in 50 attempts")


def success_region(house: House, category: int) -> np.ndarray:
    """Free cells within Chebyshev distance 1 of an instance of `category` (where stop succeeds)."""
    return chebyshev_ball(house.objects == category, 1) & ~house.walls


def make_episodes(params: Mapping[str, Any], n: int, split: str, seed: int) -> dict[str, Any]:
    """`n` episodes (one per house) in the ObjectNav-v1 layout: a target category with 1..max_instances
    instances, a start cell at geodesic distance >= min_geodesic from the nearest success cell."""
    rng = stream(int(seed), "episodes", split)
    episodes: list[dict[str, Any]] = []
    goals: dict[str, list[dict[str, Any]]] = {}
    base = {"train": 1_000_000, "test": 2_000_000, "val": 3_000_000}.get(split, 4_000_000)
    scene_seed = base + 10_000 * int(seed)
    lo_i, hi_i = (int(x) for x in params["instances"])
    while len(episodes) < n:
        scene_seed += 1
        house = generate_house(scene_seed, params)
        counts = np.bincount(house.objects[house.objects >= 0], minlength=len(CATEGORIES))
        ok = [c for c in range(len(CATEGORIES)) if lo_i <= counts[c] <= hi_i]
        if not ok:
            continue
        cat = int(rng.choice(ok))
        region = success_region(house, cat)
        dist = distance_field(~house.walls, region)
        cand = np.argwhere((dist >= int(params["min_geodesic"])) & (house.room_id >= 0))
        if len(cand) == 0:
            continue
        start = cand[int(rng.integers(len(cand)))]
        scene = f"house_{scene_seed}"
        key = f"{scene}_{CATEGORIES[cat]}"
        goals[key] = [{"object_id": int(i), "object_name": f"{CATEGORIES[cat]}_{i}",
                       "object_category": CATEGORIES[cat], "position": [int(r), int(c)],
                       "room_id": int(house.room_id[r, c]), "room_type": ROOM_TYPES[house.room_type[house.room_id[r, c]]]}
                      for i, (r, c) in enumerate(np.argwhere(house.objects == cat))]
        episodes.append({"episode_id": str(len(episodes)), "scene_id": scene, "scene_seed": scene_seed,
                         "start_position": [int(start[0]), int(start[1])], "start_rotation": 0,
                         "object_category": CATEGORIES[cat], "goals_key": key,
                         "info": {"geodesic_distance": int(dist[start[0], start[1]]),
                                  "n_rooms": int(len(house.room_type))}})
    return {"format": FORMAT, "split": split,
            "generator": {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items()},
            "room_types": list(ROOM_TYPES), "room_prior": room_prior().round(6).tolist(),
            "category_to_task_category_id": {c: i for i, c in enumerate(CATEGORIES)},
            "episodes": episodes, "goals_by_category": goals}


def write_episodes(path: str | Path, dataset: Mapping[str, Any]) -> None:
    from paperflow.core.io import write_json

    write_json(path, dataset)


def load_episodes(path: str | Path) -> dict[str, Any]:
    """Read an episode file and check it: format tag, fields, goals present for every episode."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} episode file (format = {data.get('format')!r})")
    need = {"episode_id", "scene_id", "scene_seed", "start_position", "object_category", "goals_key", "info"}
    for ep in data["episodes"]:
        missing = need - set(ep)
        if missing:
            raise ValueError(f"{path}: episode {ep.get('episode_id')} lacks {sorted(missing)}")
        if ep["goals_key"] not in data["goals_by_category"]:
            raise ValueError(f"{path}: no goals for {ep['goals_key']}")
    return data
