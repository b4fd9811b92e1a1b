"""The gridworld as a Gymnasium environment (id `paperflow/HydraNav-v0`).

Episodes come from an episode file (house.make_episodes / load_episodes); the environment regenerates
each house from its scene seed and the file's generator parameters. Actions: 0..3 move N/E/S/W (a move
into a wall leaves the agent in place), 4 = stop (ends the episode). Observation (a Dict space): the
agent's map so far — occupancy (0 unknown, 1 free, 2 wall), revealed room types (-1 unknown or a door
cell), seen objects (-1 none) — its position and the goal category. Cells within Euclidean radius
`view_radius` are seen when the straight line to them crosses no wall; a room's type is revealed when
any of its cells is seen. Success: stop within Chebyshev distance 1 of an instance of the goal category.
Reward: 1 on success (a plain sparse reward; our controllers do not use it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from paperflow.hydra_nav.bfs import MOVES, distance_field
from paperflow.hydra_nav.house import CATEGORIES, ROOM_TYPES, House, generate_house, success_region

ENV_ID = "paperflow/HydraNav-v0"
UNKNOWN, FREE_SEEN, WALL_SEEN = 0, 1, 2
STOP = 4


def line_of_sight_table(radius: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (k, 2) within Euclidean `radius` and, per offset, the intermediate cells (k, L, 2) of the
    straight line from the origin (padded with the origin, which is never a wall)."""
    offs, paths = [], []
    for dr in range(-radius, radius + 1):
        for dc in range(-radius, radius + 1):
            if dr * dr + dc * dc > radius * radius:
                continue
            n = max(abs(dr), abs(dc))
            mids = {(round(dr * t / n), round(dc * t / n)) for t in range(1, n)} if n > 1 else set()
            mids.discard((0, 0))
            mids.discard((dr, dc))
            offs.append((dr, dc))
            paths.append(sorted(mids))
    L = max(1, max(len(p) for p in paths))
    table = np.zeros((len(offs), L, 2), dtype=np.int64)
    for i, p in enumerate(paths):
        if p:
            table[i, : len(p)] = p
    return np.array(offs, dtype=np.int64), table


class HydraNavEnv(gym.Env):
    """ObjectNav in a gridworld house; see the module docstring."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, episodes: Mapping[str, Any], view_radius: int = 3, max_steps: int = 400,
                 render_mode: str | None = None) -> None:
        self.dataset = episodes
        self.gen = dict(episodes["generator"])
        self.size = int(self.gen["size"])
        self.view_radius = int(view_radius)
        self.max_steps = int(max_steps)
        self.render_mode = render_mode
        s = self.size
        self.observation_space = spaces.Dict({
            "occupancy": spaces.Box(0, 2, (s, s), np.int8),
            "rooms": spaces.Box(-1, len(ROOM_TYPES) - 1, (s, s), np.int8),
            "objects": spaces.Box(-1, len(CATEGORIES) - 1, (s, s), np.int8),
            "position": spaces.Box(0, s - 1, (2,), np.int64),
            "goal": spaces.Discrete(len(CATEGORIES)),
        })
        self.action_space = spaces.Discrete(5)
        self._offs, self._los = line_of_sight_table(self.view_radius)
        self._houses: dict[int, House] = {}
        self.episode: dict[str, Any] = {}

    # -- episode set-up ---------------------------------------------------------------------------
    def house_of(self, scene_seed: int) -> House:
        if scene_seed not in self._houses:
            if len(self._houses) > 64:
                self._houses.clear()
            self._houses[scene_seed] = generate_house(scene_seed, self.gen)
        return self._houses[scene_seed]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """options: {"episode_index": i} picks an episode; otherwise one is drawn with the env's RNG."""
        super().reset(seed=seed)
        eps = self.dataset["episodes"]
        idx = (int(options["episode_index"]) if options and "episode_index" in options
               else int(self.np_random.integers(len(eps))))
        ep = eps[idx]
        self.episode = ep
        self.house = self.house_of(int(ep["scene_seed"]))
        self.goal = CATEGORIES.index(ep["object_category"])
        for g in self.dataset["goals_by_category"][ep["goals_key"]]:
            if self.house.objects[tuple(g["position"])] != self.goal:
                raise ValueError(f"episode {ep['episode_id']}: goal {g['object_name']} is not in the regenerated "
                                 "house (generator parameters differ from the file's?)")
        self.region = success_region(self.house, self.goal)
        s = self.size
        self.occupancy = np.zeros((s, s), np.int8)
        self.rooms = np.full((s, s), -1, np.int8)
        self.objects = np.full((s, s), -1, np.int8)
        self._room_seen = np.zeros(len(self.house.room_type), bool)
        self.pos = (int(ep["start_position"][0]), int(ep["start_position"][1]))
        self.steps = 0
        self.moves = 0
        self.visits = np.zeros((s, s), np.int32)
        self.visits[self.pos] = 1
        self.new_cells = self._observe()
        return self._obs(), self._info(False)

    def geodesic(self) -> int:
        """Shortest-path length from the start to the success region (ℓ* of SPL)."""
        d = distance_field(~self.house.walls, self.region)
        return int(d[tuple(self.episode["start_position"])])

    # -- dynamics ------------------------------------------------------------------------------------
    def _observe(self) -> int:
        """Reveal what is visible from the current cell; returns the number of newly seen cells."""
        r, c = self.pos
        s = self.size
        tgt = self._offs + np.array([r, c])
        inb = (tgt[:, 0] >= 0) & (tgt[:, 0] < s) & (tgt[:, 1] >= 0) & (tgt[:, 1] < s)
        mids = self._los + np.array([r, c])
        mids = np.clip(mids, 0, s - 1)
        blocked = self.house.walls[mids[..., 0], mids[..., 1]].any(axis=1)
        vis = tgt[inb & ~blocked]
        vr, vc = vis[:, 0], vis[:, 1]
        before = int((self.occupancy != UNKNOWN).sum())
        w = self.house.walls[vr, vc]
        self.occupancy[vr, vc] = np.where(w, WALL_SEEN, FREE_SEEN)
        self.objects[vr, vc] = self.house.objects[vr, vc]
        rid = self.house.room_id[vr, vc]
        new_rooms = np.unique(rid[rid >= 0])
        new_rooms = new_rooms[~self._room_seen[new_rooms]]
        if new_rooms.size:
            self._room_seen[new_rooms] = True
            for k in new_rooms:
                self.rooms[self.house.room_id == k] = self.house.room_type[k]
        return int((self.occupancy != UNKNOWN).sum()) - before

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        a = int(action)
        if not self.action_space.contains(a):
            raise ValueError(f"invalid action {action!r}")
        self.steps += 1
        if a == STOP:
            success = bool(self.region[self.pos])
            self.new_cells = 0
            return self._obs(), float(success), True, False, self._info(success)
        r, c = self.pos[0] + int(MOVES[a, 0]), self.pos[1] + int(MOVES[a, 1])
        if not self.house.walls[r, c]:
            self.pos = (r, c)
            self.moves += 1
            self.visits[self.pos] += 1
        self.new_cells = self._observe()
        truncated = self.steps >= self.max_steps
        return self._obs(), 0.0, False, truncated, self._info(False)

    def _obs(self) -> dict[str, Any]:
        return {"occupancy": self.occupancy.copy(), "rooms": self.rooms.copy(), "objects": self.objects.copy(),
                "position": np.array(self.pos, dtype=np.int64), "goal": self.goal}

    def _info(self, success: bool) -> dict[str, Any]:
        return {"success": success, "moves": self.moves, "steps": self.steps, "new_cells": self.new_cells,
                "revisit": bool(self.visits[self.pos] > 1), "episode_id": self.episode.get("episode_id")}

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        chars = np.array([" ", ".", "#"])[self.occupancy]
        chars[self.objects >= 0] = "o"
        chars[self.pos] = "@"
        return "\n".join("".join(row) for row in chars)


def register() -> None:
    """Register ENV_ID with Gymnasium (idempotent): gym.make(ENV_ID, episodes=...)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="paperflow.hydra_nav.env:HydraNavEnv")


register()
