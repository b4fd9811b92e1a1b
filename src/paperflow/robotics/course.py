"""The obstacle course of the shared tabletop simulator, in state-only mode (spec e.3; GAM's task).

A scene is a `sim.World` (the same dynamics, workspace bounds and Bridge 7-D actions as every other
robotics study) holding three things the course places itself: the carried object, already grasped at
the start pose; a cylinder obstacle standing on the table between the start and the goal; and the goal
plate. The task ("carry the {color} {shape} over the obstacle to the {color} plate") is to move the
end effector from the start to the goal over the obstacle, through a via-point above its top.

Demonstrations are *recorded*, not drawn from a formula: a scripted expert plans waypoints in world
coordinates (before the obstacle at via height, the via-point, after the obstacle, the goal), tracks
them with a P-control step limit (6 mm per step x a per-episode speed x 8 log-normal
segment speeds, the time-warp of spec e.3), turns the wrist by the task's yaw twist as it goes, and
runs in the data-collection (non-blocking) mode: reached ≠ commanded (gain κ, 1 mm noise). What GAM
and its baselines see are the recorded states, as for any Bridge trajectory; nothing of the course is
written in a canonical frame. The course geometry scales with the start→goal distance L (obstacle radius
0.08 L, height 0.16 L, via-point 0.10 L above the top, start and goal 0.10 L above the table), so a pose shift is a similarity transform of the
*scene*; the expert's corner-cutting and step limits are absolute, so the demonstrated *paths* are not.

No rendering is done here (state-only mode); `World.snapshot()` of a course scene renders with the
shared `Renderer` like any other scene.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.robotics.sim import HI, LO, Obj, Plate, SimConfig, Task, World, wrap_angle

OBST_R, OBST_H, CLEAR = 0.08, 0.16, 0.10  # obstacle radius, height, via clearance (x L)
CARRY = 0.10  # start and goal height of the EEF above the table (x L)
STEP = 0.006  # the expert's nominal step (m), x its speed and segment speeds
TASK_TWIST = (0.6, -0.4, 0.9)  # yaw turned along the course, per task (rad)
MARGIN = 0.01  # scenes keep every course point this far inside the workspace (m)
PASS = 0.012  # the expert's waypoints before/after the obstacle sit this far beyond its rim (m)


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_R(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll) (the simulator's rpy convention)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp = math.cos(r), math.sin(r), math.cos(p), math.sin(p)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    return rot_z(y) @ Ry @ Rx


def R_to_rpy(R: np.ndarray) -> np.ndarray:
    """Inverse of `rpy_to_R` (pitch in (-pi/2, pi/2))."""
    pitch = math.asin(max(-1.0, min(1.0, -float(R[2, 0]))))
    roll = math.atan2(float(R[2, 1]), float(R[2, 2]))
    yaw = math.atan2(float(R[1, 0]), float(R[0, 0]))
    return np.array([roll, pitch, yaw])


@dataclass
class Scene:
    """One course: what a policy may perceive (start, goal, obstacle) and the task id (twist index). GAM's own
    pose simulator describes its instances with the same class (its obstacle fractions: r 0.08, h 0.15)."""

    task: int
    p0: np.ndarray  # EEF start (3,)
    goal: np.ndarray  # EEF goal (3,), above the plate centre
    yaw: float  # direction of the start->goal axis
    L: float  # start->goal distance
    a: float  # obstacle position along the axis (fraction of L)
    d: float  # obstacle lateral offset from the axis (fraction of L)
    obstacle: np.ndarray  # centre of the obstacle's base (3,), z = 0
    via: np.ndarray  # via-point above the obstacle (3,)
    r_frac: float = OBST_R  # obstacle radius / L
    h_frac: float = OBST_H  # obstacle height / L

    @property
    def Rc(self) -> np.ndarray:
        return rot_z(self.yaw)

    @property
    def obst_r(self) -> float:
        return self.r_frac * self.L

    @property
    def obst_h(self) -> float:
        return self.h_frac * self.L


def _inside(x: np.ndarray) -> bool:
    return bool(np.all(x[:2] >= LO[:2] + MARGIN) and np.all(x[:2] <= HI[:2] - MARGIN))


def sample_scene(rng: np.random.Generator, task: int, cond: dict[str, Any], L0: float,
                 max_tries: int = 10_000) -> Scene:
    """A scene of condition `cond` (yaw, scale, start box, obstacle offset range) inside the workspace.

    The start is drawn in `cond["start"]` ((x_lo, y_lo), (x_hi, y_hi)); yaw, scale and offset are redrawn
    together with it until the goal and the obstacle's footprint lie inside the workspace."""
    lo_s, hi_s = np.array(cond["start"][0], float), np.array(cond["start"][1], float)
    for _ in range(max_tries):
        yaw = float(rng.uniform(*cond["yaw"]))
        L = L0 * float(rng.uniform(*cond["scale"]))
        xy = rng.uniform(lo_s, hi_s)
        a = float(rng.uniform(0.4, 0.6))
        lo, hi = cond["offset"]
        d = float(rng.uniform(lo, hi)) * (1 if rng.random() < 0.5 else -1)
        Rc = rot_z(yaw)
        p0 = np.array([xy[0], xy[1], CARRY * L])
        goal = p0 + L * Rc @ np.array([1.0, 0.0, 0.0])
        base = p0 + L * Rc @ np.array([a, d, 0.0])
        base[2] = 0.0
        rim = [base + OBST_R * L * np.array([math.cos(t), math.sin(t), 0.0]) for t in np.linspace(0, 2 * np.pi, 8)]
        if _inside(p0) and _inside(goal) and all(_inside(r) for r in rim):
            via = base + np.array([0.0, 0.0, (OBST_H + CLEAR) * L])
            return Scene(task, p0, goal, yaw, L, a, d, base, via)
    raise RuntimeError(f"no scene of condition {cond} fits the workspace in {max_tries} draws")


def make_world(scene: Scene, rng: np.random.Generator, kappa: float = 1.0) -> World:
    """The shared simulator's World for a scene: carried object held, obstacle on the table, goal plate."""
    size = 0.03
    carried = Obj("red", "cube", size, scene.p0 + np.array([0.0, 0.0, -size / 2]), held=True,
                  offset=np.array([0.0, 0.0, -size / 2]))
    obstacle = Obj("blue", "cylinder", 2 * scene.obst_r,
                   np.array([scene.obstacle[0], scene.obstacle[1], scene.obst_r]))
    plate = Plate("green", scene.goal[:2].copy(), radius=max(0.05 * scene.L, 0.02))
    cfg = SimConfig(views=(), templates=("carry",))
    return World.from_parts(cfg, rng, [carried, obstacle], [plate], Task("carry", 0, plate=0), scene.p0,
                            np.array([0.0, 0.0, scene.yaw]), 0.0, kappa=kappa)


def expert_waypoints(scene: Scene) -> list[np.ndarray]:
    """Before the obstacle (at via height), the via-point, after the obstacle, the goal (world frame)."""
    u = scene.goal[:2] - scene.p0[:2]
    u = u / np.linalg.norm(u)
    off = scene.obst_r + PASS
    vz = scene.via[2]
    before = np.array([*(scene.obstacle[:2] - off * u), vz])
    after = np.array([*(scene.obstacle[:2] + off * u), vz])
    return [before, scene.via.copy(), after, scene.goal.copy()]


def _progress(p: np.ndarray, wps: list[np.ndarray], k: int, start: np.ndarray) -> float:
    """Fraction of the waypoint polyline covered: waypoints passed + the share of the current leg."""
    pts = [start] + wps
    legs = np.array([np.linalg.norm(pts[i + 1] - pts[i]) for i in range(len(wps))])
    done = legs[:k].sum()
    if k < len(wps):
        done += max(0.0, legs[k] - float(np.linalg.norm(wps[k] - p)))
    return float(min(1.0, done / legs.sum()))


def record_demo(scene: Scene, rng: np.random.Generator, speed_range: tuple[float, float] = (0.8, 1.25),
                noise: float = 0.001, blocking: bool = False, warp: bool = True,
                max_steps: int = 400, hold: int = 5) -> dict[str, np.ndarray]:
    """Run the scripted expert in the simulator; the recorded trajectory (states, actions) in Bridge units.

    `blocking=False` is the data-collection mode (gain κ ~ U[0.7, 1.0], 1 mm noise per step); the
    reference path of a scene is `record_demo(scene, rng, (1, 1), 0, True, warp=False, hold=0)`. At the
    goal the expert holds still for `hold` steps (commands = noise only), as Bridge's scripted episodes end."""
    kappa = 1.0 if blocking else float(rng.uniform(0.7, 1.0))
    w = make_world(scene, rng, kappa)
    speed = float(rng.uniform(*speed_range))
    seg = np.exp(rng.normal(0, 0.3, 8)) if warp else np.ones(8)
    wps = expert_waypoints(scene)
    twist = TASK_TWIST[scene.task % len(TASK_TWIST)]
    states, actions, snaps = [w.state()], [], [w.snapshot()]
    k = 0
    for _ in range(max_steps):
        if k >= len(wps):
            break
        prog = _progress(w.p, wps, k, scene.p0)
        step = STEP * speed * seg[min(7, int(prog * 8))]
        d = wps[k] - w.p
        n = float(np.linalg.norm(d))
        a = np.zeros(7)
        a[:3] = d if n <= step else d / n * step
        b = math.sin(math.pi * prog) ** 2
        target = np.array([0.2 * b, 0.1 * b, scene.yaw + twist * prog])
        a[3:6] = np.clip(wrap_angle(target - w.rpy), -0.1, 0.1)
        a[:6] += rng.normal(0, noise, 6) * np.array([1, 1, 1, 5, 5, 5])
        a[6] = 0.0  # the gripper stays closed on the carried object
        w.step(a, blocking)
        states.append(w.state())
        actions.append(a)
        snaps.append(w.snapshot())
        # switch to the next waypoint within 1 cm (the goal: within 2 mm, then stop)
        if np.linalg.norm(wps[k] - w.p) < (0.002 if k == len(wps) - 1 else 0.01):
            k += 1
    if k >= len(wps):
        for _ in range(hold):
            a = np.zeros(7)
            a[:6] = rng.normal(0, noise * 0.25, 6)
            w.step(a, blocking)
            states.append(w.state())
            actions.append(a)
            snaps.append(w.snapshot())
    S = np.array(states)
    return {"state": S, "action": np.array(actions).reshape(-1, 7), "positions": S[:, :3].copy(),
            "rotations": np.stack([rpy_to_R(s[3:6]) for s in S]), "success": np.array(w.success()),
            "snapshots": snaps, "kappa": kappa, "instruction": w.instruction(), "task_id": w.task_id()}


def reference_path(scene: Scene) -> np.ndarray:
    """The expert's path for a scene without noise, time-warp or gain (positions (N, 3))."""
    return record_demo(scene, np.random.default_rng(0), (1.0, 1.0), 0.0, True, warp=False, hold=0)["positions"]


class Plant:
    """A course scene in the simulator's blocking (evaluation) mode, driven by pose targets.

    `step(dp, R_target)` sends the Bridge action [dp, Δrpy, gripper closed], Δrpy the clipped (0.1 rad)
    difference between the target's and the current roll-pitch-yaw; returns the reached (p, R)."""

    def __init__(self, scene: Scene):
        self.world = make_world(scene, np.random.default_rng(0))

    @property
    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        return self.world.p.copy(), rpy_to_R(self.world.rpy)

    def step(self, dp: np.ndarray, R_target: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        a = np.zeros(7)
        a[:3] = dp
        if R_target is not None:
            a[3:6] = np.clip(wrap_angle(R_to_rpy(R_target) - self.world.rpy), -0.1, 0.1)
        self.world.step(a, True)
        return self.pose


# ----------------------------------------------------------------------- the Bridge raw tree and back
FOLDER = "carry_over_obstacle"  # the course's task folder in the raw tree (simdata.TEMPLATE_FOLDERS["carry"])
SCENE_KEYS = ("task", "p0", "goal", "yaw", "L", "a", "d", "obstacle", "via", "r_frac", "h_frac")


def scene_to_json(sc: Scene) -> dict[str, Any]:
    return {k: (getattr(sc, k).tolist() if isinstance(getattr(sc, k), np.ndarray) else getattr(sc, k))
            for k in SCENE_KEYS}


def scene_from_json(d: dict[str, Any]) -> Scene:
    return Scene(int(d["task"]), np.array(d["p0"], float), np.array(d["goal"], float), float(d["yaw"]), float(d["L"]),
                 float(d["a"]), float(d["d"]), np.array(d["obstacle"], float), np.array(d["via"], float),
                 float(d.get("r_frac", OBST_R)), float(d.get("h_frac", OBST_H)))


def write_raw_tree(raw_root: str | Path, sessions: dict[str, list[tuple[Scene, dict[str, Any]]]],
                   width: int = 64, height: int = 48, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Recorded course demos as a Bridge V2 raw tree (one dated session per key, the fixed camera only,
    no distractors), through the robotics writer. Returns {relative trajectory path: {"session", "index",
    "scene"}} — the scene geometry that the tiny profile perceives from state (spec e.1), which a Bridge
    trajectory does not carry."""
    import datetime as dt
    import json
    from types import SimpleNamespace

    from paperflow.core.seeding import stream
    from paperflow.robotics.sim import SLOT_TOPICS, Renderer, session_cameras
    from paperflow.robotics.simdata import write_trajectory

    raw_root = Path(raw_root)
    truth_root = raw_root.parent / "truth"
    cfg = SimConfig(width=width, height=height, views=(0,), templates=("carry",), cam_jitter=False)
    base = dt.datetime(2023, 1, 2, 9, 0, 0)
    index: dict[str, dict[str, Any]] = {}
    for si, (key, demos) in enumerate(sorted(sessions.items())):
        date = base + dt.timedelta(days=si)
        sess = raw_root / "sim" / "tabletop_sim" / FOLDER / "00" / date.strftime("%Y-%m-%d_%H-%M-%S")
        cams = session_cameras(cfg, stream(seed, "course", "cameras", si))
        ren = Renderer(cams[0], cfg)
        config = {"agent": {"env": ["TabletopSimEnv", {"camera_topics": [SLOT_TOPICS[0]], "image_size": [height, width]}]},
                  "simulator": {"template": "carry", "session": key}}
        sess.mkdir(parents=True, exist_ok=True)
        (sess / "config.json").write_text(json.dumps(config, indent=1))
        (sess / "collection_metadata.json").write_text(json.dumps({"robot": "sim", "date": str(date)}))
        for i, (sc, rec) in enumerate(demos):
            roll = {"states": rec["state"], "commanded": rec["action"], "frames": {0: [ren.render(s) for s in rec["snapshots"]]},
                    "objpos": np.stack([np.stack([o[3] for o in s["objs"]]) for s in rec["snapshots"]]),
                    "success": bool(rec["success"]), "instruction": rec["instruction"], "task_id": rec["task_id"],
                    "kappa": rec["kappa"], "wrist_poses": {}, "distract": SimpleNamespace(params={})}
            rel = sess.relative_to(raw_root) / "raw" / "traj_group0" / f"traj{i}"
            write_trajectory(raw_root / rel, truth_root / rel.parent / f"traj{i}.npz", roll, [0], False, False, cams)
            index[str(rel)] = {"session": key, "index": i, "scene": scene_to_json(sc)}
    return index
