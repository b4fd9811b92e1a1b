"""Controllers and trigger policies, and the episode loop that couples them to the environment.

Fast controller (reactive): if the goal has been seen, walk the BFS path to a cell within Chebyshev 1
of a seen instance and stop there; else follow a committed subgoal if there is one; else step towards the
nearest frontier (known free cell next to unknown space; ties broken at random, memoryless).
Slow planner (deliberative, scripted): score each reachable frontier f by
P(goal | room(f)) · exp(−dist(f)/λ) · (1 − visited(f)) (mean prior where room(f) is unknown, e.g. a door
cell) and commit to the best as a subgoal until it is reached or the goal is seen.
Triggers decide, before each fast action while the goal is unseen, whether to call the slow planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from paperflow.hydra_nav.bfs import chebyshev_ball, dilate4, distance_field, downhill
from paperflow.hydra_nav.env import FREE_SEEN, STOP, UNKNOWN
from paperflow.hydra_nav.house import room_prior

FEATURES = ("steps_since_new", "steps_since_plan", "frontier_count", "subgoal_dist", "revisits", "explored")


class Trigger(Protocol):
    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool: ...


@dataclass
class Never:
    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return False


@dataclass
class Always:
    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return True


@dataclass
class Every:
    k: int

    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return t % self.k == 0


@dataclass
class Stagnation:
    """Heuristic (d): no new cell seen in the last m steps, or standing on a revisited cell."""

    m: int

    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return bool(feats[0] >= self.m or feats[4] > 0)


@dataclass
class RandomTrigger:
    p: float

    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return bool(rng.random() < self.p)


@dataclass
class Logistic:
    """(e): p(trigger | f) = σ(w·(f − μ)/σ_f + b), sampled."""

    w: np.ndarray
    b: float
    mu: np.ndarray
    sd: np.ndarray

    def prob(self, feats: np.ndarray) -> np.ndarray:
        z = ((np.asarray(feats, float) - self.mu) / self.sd) @ self.w + self.b
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def __call__(self, feats: np.ndarray, t: int, rng: np.random.Generator) -> bool:
        return bool(rng.random() < float(self.prob(feats)))

    def to_dict(self) -> dict[str, Any]:
        return {"w": self.w.tolist(), "b": float(self.b), "mu": self.mu.tolist(), "sd": self.sd.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Logistic":
        return cls(np.asarray(d["w"], float), float(d["b"]), np.asarray(d["mu"], float), np.asarray(d["sd"], float))


def make_trigger(spec: Mapping[str, Any]) -> Trigger:
    """{"kind": never|always|every|stagnation|random|logistic, ...parameters}."""
    kind = spec["kind"]
    if kind == "never":
        return Never()
    if kind == "always":
        return Always()
    if kind == "every":
        return Every(int(spec["k"]))
    if kind == "stagnation":
        return Stagnation(int(spec["m"]))
    if kind == "random":
        return RandomTrigger(float(spec["p"]))
    if kind == "logistic":
        return Logistic.from_dict(spec["model"])
    raise ValueError(f"unknown trigger kind {kind!r}")


@dataclass
class Navigator:
    """Map-keeping agent: fast controller + slow planner; caches distance fields until the map changes."""

    goal: int
    lam: float
    prior: np.ndarray = field(default_factory=room_prior)
    subgoal: tuple[int, int] | None = None
    _key: tuple[Any, ...] | None = None
    _field: np.ndarray | None = None
    version: int = 0

    def update(self, obs: Mapping[str, Any], new_cells: int) -> None:
        if new_cells or self.version == 0:
            self.version += 1
            occ = obs["occupancy"]
            self.passable = occ == FREE_SEEN
            self.frontier = self.passable & dilate4(occ == UNKNOWN)
            self.rooms = obs["rooms"]
            seen = obs["objects"] == self.goal
            self.target_seen = bool(seen.any())
            self.region = chebyshev_ball(seen, 1) & self.passable if self.target_seen else None

    def _dist_to(self, name: str, sources: np.ndarray, pos: tuple[int, int]) -> np.ndarray:
        """Distance field to `sources`, expanded until `pos` is reached; re-planned only when the map (or
        the subgoal) changed or the cached field does not reach `pos` yet."""
        key = (name, self.version, self.subgoal)
        if key != self._key or self._field is None or self._field[pos] < 0:
            self._field = distance_field(self.passable, sources, until=pos)
            self._key = key
        return self._field

    def fast_action(self, pos: tuple[int, int], rng: np.random.Generator) -> int:
        if self.target_seen:
            assert self.region is not None
            if self.region[pos]:
                return STOP
            a = downhill(self._dist_to("goal", self.region, pos), pos, rng)
            return STOP if a is None else a
        if self.subgoal is not None and pos == self.subgoal:
            self.subgoal = None  # reached
        if self.subgoal is not None:
            src = np.zeros_like(self.passable)
            src[self.subgoal] = True
            a = downhill(self._dist_to("subgoal", src, pos), pos, rng)
            if a is not None:
                return a
            self.subgoal = None
        if not self.frontier.any():
            return STOP  # nothing left to explore: give up
        a = downhill(self._dist_to("frontier", self.frontier, pos), pos, rng)
        return STOP if a is None else a

    def slow_plan(self, pos: tuple[int, int], visits: np.ndarray) -> tuple[int, int] | None:
        """Score the reachable frontiers and commit to the best (None: no reachable frontier)."""
        src = np.zeros_like(self.passable)
        src[pos] = True
        d = distance_field(self.passable, src)
        cand = self.frontier & (d >= 0)
        if not cand.any():
            self.subgoal = None
            return None
        rr, cc = np.nonzero(cand)
        col = self.prior[:, self.goal]
        rt = self.rooms[rr, cc].astype(np.int64)
        p = np.where(rt >= 0, col[np.clip(rt, 0, None)], col.mean())
        score = p * np.exp(-d[rr, cc] / self.lam) * (visits[rr, cc] == 0)
        j = int(np.argmax(score))
        self.subgoal = (int(rr[j]), int(cc[j]))
        return self.subgoal

    def subgoal_dist(self, pos: tuple[int, int]) -> float:
        if self.subgoal is None:
            return 0.0
        return float(abs(pos[0] - self.subgoal[0]) + abs(pos[1] - self.subgoal[1]))


@dataclass
class EpisodeResult:
    episode_id: str
    success: bool
    moves: int
    decisions: int
    slow_calls: int
    stagnation_calls: int
    geodesic: int
    feats: np.ndarray  # (consultations, 6) features where the trigger was consulted
    labels: np.ndarray  # (consultations,) 1 = triggered

    def record(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "success": self.success, "moves": self.moves,
                "decisions": self.decisions, "slow_calls": self.slow_calls,
                "stagnation_calls": self.stagnation_calls, "geodesic": self.geodesic}


def run_episode(env: Any, index: int, trigger: Trigger, rng: np.random.Generator, *, lam: float, stag_m: int,
                keep_steps: bool = False) -> EpisodeResult:
    """Roll out one episode of `env` (a HydraNavEnv, possibly wrapped) with the fast controller and
    `trigger` deciding slow calls; counts what operation time needs (moves, decisions, slow calls)."""
    obs, info = env.reset(options={"episode_index": index})
    base = env.unwrapped
    nav = Navigator(goal=int(obs["goal"]), lam=lam)
    nav.update(obs, 1)
    n_cells = base.size * base.size
    since_new, since_plan, t = 0, 10**6, 0
    calls = stag_calls = 0
    feats_l: list[np.ndarray] = []
    labels_l: list[int] = []
    pos = (int(obs["position"][0]), int(obs["position"][1]))
    success = False
    while True:
        revisits = int(base.visits[pos]) - 1
        if not nav.target_seen:
            f = np.array([since_new, min(since_plan, 400), float(nav.frontier.sum()), nav.subgoal_dist(pos),
                          revisits, float((obs["occupancy"] != UNKNOWN).sum()) / n_cells])
            fire = trigger(f, t, rng)
            if keep_steps:
                feats_l.append(f)
                labels_l.append(int(fire))
            if fire:
                calls += 1
                stag_calls += int(since_new >= stag_m or revisits > 0)
                nav.slow_plan(pos, base.visits)
                since_plan = 0
        a = nav.fast_action(pos, rng)
        obs, _, term, trunc, info = env.step(a)
        t += 1
        since_plan += 1
        since_new = 0 if info["new_cells"] > 0 else since_new + 1
        pos = (int(obs["position"][0]), int(obs["position"][1]))
        nav.update(obs, info["new_cells"])
        if term or trunc:
            success = bool(info["success"])
            break
    return EpisodeResult(str(base.episode["episode_id"]), success, int(info["moves"]), t, calls, stag_calls,
                         int(base.episode["info"]["geodesic_distance"]),
                         np.array(feats_l, float).reshape(-1, len(FEATURES)), np.array(labels_l, np.int8))
