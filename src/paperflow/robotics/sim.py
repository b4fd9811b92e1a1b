"""Multi-view tabletop simulator (pure numpy) in Bridge V2 action/state semantics.

World: a table (plane z = 0) with a checker texture, 2-4 objects (cube or cylinder), 1-2 flat plates,
an end effector (EEF) with position p, orientation rpy and gripper width w in [0, 1] (1 = open).
Actions are Bridge 7-D deltas `[dx, dy, dz, droll, dpitch, dyaw, g]` (metres / radians per step,
g an absolute gripper command). Cameras are pinhole with look-at extrinsics in the OpenCV frame;
each view has its own distractor processes (lighting, moving background, screen-space blob) that
are independent of the actions and of the other views.

Closed-loop API (used by later studies for policy evaluation)::

    env = TabletopSim(cfg, seed)
    obs = env.reset(task_id=None, episode_seed=None)   # {"images": {slot: HxWx3 uint8}, "state": (7,), "instruction": str}
    obs, info = env.step(action7)                      # info: {"success", "done", "t"}
    evaluate(policy, cfg, n_episodes_per_task, max_steps, seeds) -> {"success_rate", "per_task", "mean_steps"}

`policy.reset(instruction)`; `policy.act(obs) -> (7,)` in raw Bridge units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from paperflow.core.seeding import stream

LO = np.array([0.10, -0.15, -0.01])
HI = np.array([0.45, 0.25, 0.25])
CENTER = np.array([0.275, 0.05, 0.0])
SHOULDER = np.array([-0.02, 0.05, 0.28])  # robot base/shoulder, drawn as the arm's fixed end

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 40), "green": (40, 170, 60), "blue": (40, 70, 200), "yellow": (220, 200, 40),
    "purple": (140, 50, 170), "orange": (235, 130, 30), "white": (235, 235, 235), "black": (30, 30, 30),
}
SHAPES = ("cube", "cylinder")
TEMPLATES = ("put", "push", "lift")
# slot -> ROS topic the writer records (a.2 of the spec)
SLOT_TOPICS = {0: "/D435/color/image_raw", 1: "/blue/image_raw", 2: "/yellow/image_raw", 3: "/wrist/image_raw"}


@dataclass
class SimConfig:
    width: int = 160
    height: int = 120
    views: tuple[int, ...] = (0, 1, 2)  # slots rendered; 3 = wrist
    distractor_strength: float = 1.0
    distractors: dict[int, str] = field(default_factory=lambda: {0: "lighting", 1: "background", 2: "blob"})
    colors: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple", "orange")
    templates: tuple[str, ...] = TEMPLATES
    max_steps: int = 30
    blocking: bool = True  # evaluation default; data collection uses non-blocking
    noise_sigma: float = 2.0
    cam_jitter: bool = True
    arm_scale: float = 1.0  # radius multiplier of the drawn arm, wrist and fingers
    eef_rgb: tuple[float, float, float] | None = None  # wrist colour, drawn on top (None: dark grey, depth-sorted)
    zoom: float = 1.0  # focal-length multiplier of the fixed and side cameras
    n_objects: tuple[int, int] = (2, 4)  # objects per scene, drawn uniformly in [lo, hi]
    grasp_xy: float = 0.025  # a closing gripper grasps an object whose centre is this close in xy (m)
    grasp_z: float = 0.02  # ... and whose top is this close to the EEF height (m)
    obj_region: tuple[tuple[float, float], tuple[float, float]] | None = None  # objects' xy box (None: the table box)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SimConfig":
        d = dict(d)
        if "views" in d:
            d["views"] = tuple(d["views"])
        if "distractors" in d:
            d["distractors"] = {int(k): v for k, v in d["distractors"].items()}
        if d.get("eef_rgb") is not None:
            d["eef_rgb"] = tuple(float(c) for c in d["eef_rgb"])
        for k in ("colors", "templates", "n_objects"):
            if k in d:
                d[k] = tuple(d[k])
        if d.get("obj_region") is not None:
            d["obj_region"] = tuple(tuple(float(v) for v in c) for c in d["obj_region"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# --------------------------------------------------------------------------------------- cameras
@dataclass
class Camera:
    K: np.ndarray  # (3,3)
    R: np.ndarray  # (3,3) world -> camera rows [right, down, forward]
    eye: np.ndarray  # (3,)
    width: int
    height: int
    near: float = 0.02

    def project(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (...,3) -> pixel (...,2) and depth (...)."""
        Xc = (np.asarray(X) - self.eye) @ self.R.T
        z = Xc[..., 2]
        zs = np.where(z > self.near, z, np.nan)
        u = self.K[0, 0] * Xc[..., 0] / zs + self.K[0, 2]
        v = self.K[1, 1] * Xc[..., 1] / zs + self.K[1, 2]
        return np.stack([u, v], -1), zs

    def rays(self) -> np.ndarray:
        """World-frame ray directions (H,W,3) through pixel centres."""
        u, v = np.meshgrid(np.arange(self.width) + 0.5, np.arange(self.height) + 0.5)
        x = (u - self.K[0, 2]) / self.K[0, 0]
        y = (v - self.K[1, 2]) / self.K[1, 1]
        d = np.stack([x, y, np.ones_like(x)], -1)
        return d @ self.R  # R^T applied to row vectors


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray = np.array([0.0, 0.0, 1.0])) -> np.ndarray:
    f = target - eye
    f = f / np.linalg.norm(f)
    r = np.cross(f, up)
    if np.linalg.norm(r) < 1e-6:
        r = np.cross(f, np.array([1.0, 0.0, 0.0]))
    r = r / np.linalg.norm(r)
    d = np.cross(f, r)
    return np.stack([r, d, f])


def make_camera(slot: int, cfg: SimConfig, rng: np.random.Generator | None, eef: np.ndarray | None = None,
                yaw: float = 0.0) -> Camera:
    W, H = cfg.width, cfg.height
    f = 0.95 * W * (cfg.zoom if slot != 3 else 1.0)
    K = np.array([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1.0]])
    if slot == 3:  # wrist: rigidly attached to the EEF, looking down along the gripper
        eye = eef + np.array([-0.03 * math.cos(yaw), -0.03 * math.sin(yaw), 0.06])
        fwd = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        return Camera(K, look_at(eye, eef + np.array([0, 0, -0.15]) + 0.05 * fwd, up=fwd), eye, W, H)
    eyes = {0: np.array([-0.12, 0.05, 0.42]), 1: np.array([0.30, -0.42, 0.22]), 2: np.array([0.32, 0.52, 0.20])}
    eye = eyes[slot].copy()
    target = CENTER.copy()
    if rng is not None and slot != 0:
        # side cameras: per-session jitter of +-5 cm and +-10 degrees about the table centre
        ang = rng.uniform(-1, 1) * math.radians(10)
        rel = eye - target
        c, s = math.cos(ang), math.sin(ang)
        eye = target + np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1], rel[2]])
        eye = eye + rng.uniform(-0.05, 0.05, 3)
    return Camera(K, look_at(eye, target), eye, W, H)


# ------------------------------------------------------------------------------------------ world
@dataclass
class Obj:
    color: str
    shape: str
    size: float  # edge / diameter (m)
    pos: np.ndarray  # centre (3,)
    held: bool = False
    offset: np.ndarray | None = None


@dataclass
class Plate:
    color: str
    pos: np.ndarray  # (2,)
    radius: float = 0.05


@dataclass
class Task:
    template: str
    obj: int  # index of the manipulated object
    plate: int = -1
    direction: str = ""  # push: left / right

    def task_id(self, objs: list[Obj], plates: list[Plate]) -> str:
        o = objs[self.obj]
        if self.template == "carry":
            return f"carry:{o.color}:{o.shape}:{plates[self.plate].color}"
        if self.template == "put":
            return f"put:{o.color}:{o.shape}:{plates[self.plate].color}"
        if self.template == "push":
            return f"push:{o.color}:{o.shape}:{self.direction}"
        return f"lift:{o.color}:{o.shape}"

    def instruction(self, objs: list[Obj], plates: list[Plate]) -> str:
        o = objs[self.obj]
        if self.template == "carry":
            return f"carry the {o.color} {o.shape} over the obstacle to the {plates[self.plate].color} plate"
        if self.template == "put":
            return f"put the {o.color} {o.shape} on the {plates[self.plate].color} plate"
        if self.template == "push":
            return f"push the {o.color} {o.shape} to the {self.direction}"
        return f"lift the {o.color} {o.shape}"


def wrap_angle(x: np.ndarray) -> np.ndarray:
    """Wrap to (-pi, pi]."""
    y = np.mod(np.asarray(x) + np.pi, 2 * np.pi) - np.pi
    return np.where(y == -np.pi, np.pi, y)


class World:
    """State of one episode and its dynamics. `snapshot()` gives what the renderer needs."""

    def __init__(self, cfg: SimConfig, rng: np.random.Generator, task_id: str | None = None):
        self.cfg = cfg
        self.rng = rng
        n_obj = int(rng.integers(cfg.n_objects[0], cfg.n_objects[1] + 1))
        cols = list(rng.permutation(list(cfg.colors)))
        self.objs: list[Obj] = []
        lo, hi = cfg.obj_region if cfg.obj_region is not None else ((0.14, -0.10), (0.40, 0.20))
        tries = 0
        while len(self.objs) < n_obj:
            tries += 1
            if tries > 10_000:
                raise ValueError(f"cannot place {n_obj} objects 7 cm apart in the box {lo}-{hi} (SimConfig.obj_region)")
            xy = rng.uniform(lo, hi)
            if any(np.linalg.norm(xy - o.pos[:2]) < 0.07 for o in self.objs):
                continue
            size = float(rng.uniform(0.03, 0.045))
            self.objs.append(Obj(cols.pop(), str(rng.choice(SHAPES)), size, np.array([*xy, size / 2])))
        self.plates: list[Plate] = []
        n_pl = int(rng.integers(1, 3))
        while len(self.plates) < n_pl:
            xy = rng.uniform([0.14, -0.10], [0.40, 0.20])
            if any(np.linalg.norm(xy - o.pos[:2]) < 0.08 for o in self.objs) or any(
                    np.linalg.norm(xy - p.pos) < 0.12 for p in self.plates):
                continue
            self.plates.append(Plate(cols.pop() if cols else "white", xy))
        self.task = self._parse_task(task_id) if task_id else self._sample_task()
        self.p = np.array([0.25, 0.05, 0.15]) + rng.uniform(-0.04, 0.04, 3)
        self.rpy = np.array([0.0, 0.0, 0.0]) + rng.uniform(-0.1, 0.1, 3) * np.array([0.2, 0.2, 1])
        self.w = 1.0
        self.kappa = float(rng.uniform(0.7, 1.0))
        self.t = 0
        self.start_obj = self.objs[self.task.obj].pos.copy()

    @classmethod
    def from_parts(cls, cfg: SimConfig, rng: np.random.Generator, objs: list[Obj], plates: list[Plate], task: Task,
                   p: np.ndarray, rpy: np.ndarray, w: float, kappa: float = 1.0) -> "World":
        """A world with a given scene (no random layout drawn): objects, plates, task and EEF pose.
        Used by scenes that place their objects themselves (the GAM obstacle course, `course.py`)."""
        self = cls.__new__(cls)
        self.cfg, self.rng = cfg, rng
        self.objs, self.plates, self.task = objs, plates, task
        self.p = np.asarray(p, np.float64).copy()
        self.rpy = np.asarray(rpy, np.float64).copy()
        self.w = float(w)
        self.kappa = float(kappa)
        self.t = 0
        self.start_obj = objs[task.obj].pos.copy()
        return self

    def _sample_task(self) -> Task:
        tmpl = str(self.rng.choice(list(self.cfg.templates)))
        obj = int(self.rng.integers(len(self.objs)))
        if tmpl == "put":
            return Task("put", obj, plate=int(self.rng.integers(len(self.plates))))
        if tmpl == "push":
            return Task("push", obj, direction=str(self.rng.choice(["left", "right"])))
        return Task("lift", obj)

    def _parse_task(self, task_id: str) -> Task:
        """Force a task: recolour the first object/plate so the named task exists in this scene."""
        parts = task_id.split(":")
        tmpl, color, shape = parts[0], parts[1], parts[2]
        for o in self.objs[1:]:
            if o.color == color:
                o.color = next(c for c in self.cfg.colors if c not in {x.color for x in self.objs})
        self.objs[0].color, self.objs[0].shape = color, shape
        if tmpl == "put":
            for p in self.plates[1:]:
                if p.color == parts[3]:
                    p.color = "white"
            self.plates[0].color = parts[3]
            return Task("put", 0, plate=0)
        if tmpl == "push":
            return Task("push", 0, direction=parts[3])
        return Task("lift", 0)

    def task_id(self) -> str:
        return self.task.task_id(self.objs, self.plates)

    def instruction(self) -> str:
        return self.task.instruction(self.objs, self.plates)

    def state(self) -> np.ndarray:
        return np.array([*self.p, *self.rpy, self.w], dtype=np.float64)

    def step(self, a: np.ndarray, blocking: bool) -> None:
        a = np.asarray(a, dtype=np.float64)
        p_old = self.p.copy()
        if blocking:
            self.p = np.clip(self.p + a[:3], LO, HI)
            self.rpy = wrap_angle(self.rpy + a[3:6])
            self.w = float(np.clip(a[6], 0, 1))
        else:
            eps = self.rng.normal(0, 1e-3, 6)
            self.p = np.clip(self.p + self.kappa * a[:3] + eps[:3], LO, HI)
            self.rpy = wrap_angle(self.rpy + self.kappa * a[3:6] + eps[3:])
            g = float(np.clip(a[6], 0, 1))
            self.w = float(self.w + np.clip(g - self.w, -0.5, 0.5))
        self._contacts(p_old)
        self.t += 1

    def _contacts(self, p_old: np.ndarray) -> None:
        for o in self.objs:
            if o.held:
                if self.w > 0.5:  # release: drop to rest on the table
                    o.held = False
                    o.pos = np.array([o.pos[0], o.pos[1], o.size / 2])
                else:
                    o.pos = self.p + o.offset
        if self.w < 0.5 and not any(o.held for o in self.objs):
            for o in self.objs:
                top = o.pos[2] + o.size / 2
                near = np.linalg.norm(self.p[:2] - o.pos[:2]) < self.cfg.grasp_xy
                if near and abs(self.p[2] - top) < self.cfg.grasp_z:
                    o.held, o.offset = True, o.pos - self.p
                    break
        # pushing: the EEF below an object's top shoves it out of its way
        for o in self.objs:
            if o.held or self.p[2] > o.pos[2]:
                continue
            d = o.pos[:2] - self.p[:2]
            r = o.size / 2 + 0.012
            dist = np.linalg.norm(d)
            if dist < r:
                move = self.p[:2] - p_old[:2]
                dirn = d / dist if dist > 1e-9 else (move / (np.linalg.norm(move) + 1e-12))
                o.pos[:2] = self.p[:2] + dirn * r

    def success(self) -> bool:
        tk = self.task
        o = self.objs[tk.obj]
        if tk.template == "put":
            pl = self.plates[tk.plate]
            return (not o.held) and abs(o.pos[2] - o.size / 2) < 1e-6 and np.linalg.norm(o.pos[:2] - pl.pos) < pl.radius
        if tk.template == "push":
            dy = o.pos[1] - self.start_obj[1]
            return dy > 0.05 if tk.direction == "left" else dy < -0.05
        if tk.template == "carry":  # the carried object is over the goal plate, still held
            pl = self.plates[tk.plate]
            return o.held and np.linalg.norm(o.pos[:2] - pl.pos) < pl.radius
        return o.held and o.pos[2] > 0.05

    def snapshot(self) -> dict[str, Any]:
        return {"p": self.p.copy(), "rpy": self.rpy.copy(), "w": self.w,
                "objs": [(o.color, o.shape, o.size, o.pos.copy()) for o in self.objs],
                "plates": [(p.color, p.pos.copy(), p.radius) for p in self.plates]}


# ------------------------------------------------------------------------------------------ expert
class Expert:
    """Scripted waypoint expert with P-control (<= 2 cm, 0.1 rad per step, scaled by a speed factor).

    Gripper changes are ramped over two steps (commands 0.6, 0.2 then 0 when closing), giving the
    intermediate commands that binarisation exists for.
    """

    def __init__(self, rng: np.random.Generator, speed: float | None = None, noise: float = 0.002):
        self.rng = rng
        self.speed = float(rng.uniform(0.6, 1.4)) if speed is None else speed
        self.noise = noise
        self.phase = 0
        self.g = 1.0
        self.ramp: list[float] = []
        self.hold = 0

    def _waypoints(self, w: World) -> list[tuple[np.ndarray, float]]:
        tk, o = w.task, w.objs[w.task.obj]
        top = o.pos[2] + o.size / 2
        if tk.template == "push":
            side = -1.0 if tk.direction == "left" else 1.0  # start on the opposite side
            s = np.array([o.pos[0], o.pos[1] + side * 0.045, 0.08])
            low = 0.008
            return [(s, 1.0), (np.array([s[0], s[1], low]), 1.0), (np.array([s[0], s[1] - side * 0.13, low]), 1.0),
                    (np.array([s[0], s[1] - side * 0.13, 0.10]), 1.0)]
        above = np.array([o.pos[0], o.pos[1], top + 0.04])
        grasp = np.array([o.pos[0], o.pos[1], top - 0.005])
        if tk.template == "lift":
            return [(above, 1.0), (grasp, 1.0), (grasp, 0.0), (grasp + np.array([0, 0, 0.1]), 0.0)]
        pl = w.plates[tk.plate]
        place = np.array([pl.pos[0], pl.pos[1], o.size + 0.005])
        return [(above, 1.0), (grasp, 1.0), (grasp, 0.0), (grasp + np.array([0, 0, 0.05]), 0.0),
                (place + np.array([0, 0, 0.04]), 0.0), (place, 0.0), (place, 1.0), (place + np.array([0, 0, 0.06]), 1.0)]

    def act(self, w: World) -> np.ndarray:
        if self.phase == 0 or not hasattr(self, "_wps"):
            self._wps = self._waypoints(w)
        # waypoints that depend on the object are frozen once it is grasped
        if self.phase < 2:
            self._wps = self._waypoints(w)
        a = np.zeros(7)
        if self.phase >= len(self._wps):  # done: hold still
            a[:6] = self.rng.normal(0, self.noise * 0.25, 6)
            a[6] = self.g
            return a
        target, g_target = self._wps[self.phase]
        if g_target != self.g or self.ramp:
            if not self.ramp:
                self.ramp = [self.g + (g_target - self.g) * f for f in (0.4, 0.8, 1.0)]
            self.g = self.ramp.pop(0)
            a[:6] = self.rng.normal(0, self.noise * 0.25, 6)
            a[6] = self.g
            return a
        step = 0.02 * self.speed
        d = target - w.p
        n = np.linalg.norm(d)
        a[:3] = d if n <= step else d / n * step
        a[3:6] = np.clip(-w.rpy * np.array([0.5, 0.5, 0.3]), -0.1 * self.speed, 0.1 * self.speed)
        a[:6] += self.rng.normal(0, self.noise, 6) * np.array([1, 1, 1, 5, 5, 5])
        a[6] = self.g
        if n < 0.006:
            self.phase += 1
        return a


# --------------------------------------------------------------------------------------- rendering
TABLE_A = np.array([150, 120, 90], dtype=np.float32)
TABLE_B = np.array([175, 145, 110], dtype=np.float32)
BG = np.array([90, 105, 125], dtype=np.float32)
TABLE_X = (-0.15, 0.75)
TABLE_Y = (-0.45, 0.55)


class Distractors:
    """Per-view distractor processes for one episode (independent of actions and other views)."""

    def __init__(self, kinds: dict[int, str], strength: float, n_frames: int, rng: np.random.Generator, W: int, H: int):
        self.kinds = dict(kinds)
        self.s = float(strength)
        self.params: dict[str, np.ndarray] = {}
        T = n_frames
        t = np.arange(T)
        for slot, kind in self.kinds.items():
            r = stream(int(rng.integers(2**31)), "distractor", slot)
            if kind == "lighting":
                f, ph = r.uniform(0.05, 0.2), r.uniform(0, 2 * np.pi)
                walk = np.cumsum(r.normal(0, 0.04, T))
                gain = 1 + 0.4 * self.s * np.sin(2 * np.pi * f * t + ph) + self.s * walk
                cast = 1 + self.s * r.uniform(-0.15, 0.15, 3)
                bias = self.s * np.cumsum(r.normal(0, 4.0, (T, 3)), 0)
                self.params[f"{slot}/gain"] = (np.clip(gain, 0.4, 1.8)[:, None] * cast[None]).astype(np.float32)
                self.params[f"{slot}/bias"] = np.clip(bias, -40, 40).astype(np.float32)
            elif kind == "background":
                ang = r.uniform(0, 2 * np.pi)
                speed = self.s * r.uniform(2, 6)
                off = np.stack([np.cos(ang), np.sin(ang)], -1) * speed * t[:, None]
                self.params[f"{slot}/bg_offset"] = off.astype(np.float32)
                self.params[f"{slot}/bg_period"] = np.array([r.uniform(6, 14)], np.float32)
            elif kind == "blob":
                start = r.uniform([0.2 * W, 0.2 * H], [0.8 * W, 0.8 * H])
                steps = r.normal(0, 0.06 * W, (T, 2)) * self.s
                pos = np.clip(start + np.cumsum(steps, 0), [0, 0], [W, H])
                self.params[f"{slot}/blob_pos"] = pos.astype(np.float32)
                self.params[f"{slot}/blob_radius"] = np.array([0.12 * min(W, H) * (self.s > 0)], np.float32)
                self.params[f"{slot}/blob_color"] = r.uniform(0, 255, 3).astype(np.float32)
            else:
                raise ValueError(f"unknown distractor kind '{kind}'")


def _disc(img: np.ndarray, u: float, v: float, r: float, color: np.ndarray, square: bool = False) -> None:
    H, W = img.shape[:2]
    if not (np.isfinite(u) and np.isfinite(v)) or r <= 0:
        return
    x0, x1 = max(int(u - r - 1), 0), min(int(u + r + 2), W)
    y0, y1 = max(int(v - r - 1), 0), min(int(v + r + 2), H)
    if x0 >= x1 or y0 >= y1:
        return
    yy, xx = np.mgrid[y0:y1, x0:x1]
    if square:
        m = (np.abs(xx + 0.5 - u) <= r) & (np.abs(yy + 0.5 - v) <= r)
    else:
        m = (xx + 0.5 - u) ** 2 + (yy + 0.5 - v) ** 2 <= r * r
    img[y0:y1, x0:x1][m] = color


class Renderer:
    """Renders snapshots into one camera. The static table/plate layer is cached per camera."""

    def __init__(self, cam: Camera, cfg: SimConfig | None = None):
        self.cam = cam
        self.arm_scale = 1.0 if cfg is None else float(cfg.arm_scale)
        self.eef_marker = cfg is not None and cfg.eef_rgb is not None
        self.eef_rgb = np.array(cfg.eef_rgb if self.eef_marker else (60, 60, 70), np.float32)
        d = cam.rays()
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -cam.eye[2] / d[..., 2]
        hit = cam.eye[None, None, :2] + t[..., None] * d[..., :2]
        on = (t > 0) & (hit[..., 0] > TABLE_X[0]) & (hit[..., 0] < TABLE_X[1]) & (hit[..., 1] > TABLE_Y[0]) & (
            hit[..., 1] < TABLE_Y[1])
        self.hit, self.on_table = hit, on
        checker = ((np.floor(hit[..., 0] / 0.05) + np.floor(hit[..., 1] / 0.05)) % 2 == 0)
        base = np.where(checker[..., None], TABLE_A, TABLE_B)
        self.base = np.where(on[..., None], base, BG).astype(np.float32)
        self._plates_key: Any = None
        self._plated: np.ndarray | None = None

    def _static(self, plates: list) -> np.ndarray:
        key = tuple((c, float(p[0]), float(p[1]), r) for c, p, r in plates)
        if key != self._plates_key:
            img = self.base.copy()
            for c, pos, r in plates:
                m = self.on_table & (np.sum((self.hit - pos) ** 2, -1) < r * r)
                img[m] = 0.85 * np.array(COLORS[c], np.float32) + 0.15 * 255
            self._plates_key, self._plated = key, img
        return self._plated.copy()

    def render(self, snap: dict[str, Any], distract: Distractors | None = None, slot: int = 0, t: int = 0,
               noise_rng: np.random.Generator | None = None, noise_sigma: float = 2.0) -> np.ndarray:
        cam = self.cam
        img = self._static(snap["plates"])
        if distract is not None and distract.kinds.get(slot) == "background" and distract.s > 0:
            off = distract.params[f"{slot}/bg_offset"][t]
            per = float(distract.params[f"{slot}/bg_period"][0])
            u, v = np.meshgrid(np.arange(cam.width), np.arange(cam.height))
            stripes = 0.5 + 0.5 * np.sin(2 * np.pi * ((u - off[0]) + 0.5 * (v - off[1])) / per)
            tex = BG[None, None] * (0.6 + 0.8 * stripes[..., None])
            img = np.where(self.on_table[..., None], img, tex)
        items = []  # (depth, u, v, radius_px, color, square)
        p, w = snap["p"], snap["w"]
        yaw = snap["rpy"][2]
        perp = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        for c, shape, size, pos in snap["objs"]:
            items.append((pos, size / 2, np.array(COLORS[c], np.float32), shape == "cube"))
        n_objs = len(items)
        # the arm: a chain of discs from the shoulder to the wrist (large, so EEF motion is visible)
        for f in np.linspace(0.0, 0.85, 7):
            items.append((SHOULDER + f * (p + np.array([0, 0, 0.05]) - SHOULDER), 0.022 * self.arm_scale,
                          np.array([95, 95, 110], np.float32), False))
        items.append((p + np.array([0, 0, 0.03]), 0.024 * self.arm_scale, self.eef_rgb, False))
        for sgn in (-1, 1):
            items.append((p + sgn * perp * (0.01 + 0.02 * w) * self.arm_scale, 0.009 * self.arm_scale,
                          np.array([25, 25, 25], np.float32), False))
        pts = np.stack([it[0] for it in items])
        uv, z = cam.project(pts)
        order = np.argsort(-np.nan_to_num(z, nan=-1))
        for i in order:
            if not np.isfinite(z[i]):
                continue
            r = cam.K[0, 0] * items[i][1] / z[i]
            _disc(img, uv[i, 0], uv[i, 1], r, items[i][2], items[i][3])
        if self.eef_marker:  # a coloured wrist marker drawn on top (never hidden behind the arm)
            i = n_objs + 7
            if np.isfinite(z[i]):
                _disc(img, uv[i, 0], uv[i, 1], cam.K[0, 0] * items[i][1] / z[i], items[i][2], False)
        if distract is not None and distract.s > 0:
            kind = distract.kinds.get(slot)
            if kind == "blob":
                pos = distract.params[f"{slot}/blob_pos"][t]
                _disc(img, pos[0], pos[1], float(distract.params[f"{slot}/blob_radius"][0]),
                      distract.params[f"{slot}/blob_color"])
            elif kind == "lighting":
                img = img * distract.params[f"{slot}/gain"][t] + distract.params[f"{slot}/bias"][t]
        if noise_rng is not None and noise_sigma > 0:
            img = img + noise_rng.normal(0, noise_sigma, img.shape)
        return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def session_cameras(cfg: SimConfig, rng: np.random.Generator | None) -> dict[int, Camera]:
    return {s: make_camera(s, cfg, rng if cfg.cam_jitter else None) for s in cfg.views if s != 3}


# ------------------------------------------------------------------------------------- closed loop
class TabletopSim:
    """Closed-loop environment: reset / step / success over the renderer above."""

    def __init__(self, cfg: SimConfig | dict, seed: int, cameras: dict[int, Camera] | None = None,
                 render_obs: bool = True):
        self.cfg = cfg if isinstance(cfg, SimConfig) else SimConfig.from_dict(cfg)
        self.seed = seed
        self.cameras = cameras if cameras is not None else session_cameras(self.cfg, stream(seed, "cameras"))
        self.renderers = {s: Renderer(c, self.cfg) for s, c in self.cameras.items()}
        self.world: World | None = None
        self._n_resets = 0
        # False: observations carry no images (for policies that never look at them). Rendering draws only
        # from its own pixel-noise stream, so the world, the policy and every outcome are the same either way.
        self.render_obs = render_obs

    def reset(self, task_id: str | None = None, episode_seed: int | None = None) -> dict[str, Any]:
        es = self._n_resets if episode_seed is None else episode_seed
        self._n_resets += 1
        self.rng = stream(self.seed, "episode", es)
        self.world = World(self.cfg, self.rng, task_id)
        self.distract = Distractors(self.cfg.distractors, self.cfg.distractor_strength, self.cfg.max_steps + 2,
                                    self.rng, self.cfg.width, self.cfg.height)
        self.noise_rng = stream(self.seed, "pixel_noise", es)
        return self._obs()

    def render(self, distractors: bool = True, noise: bool = True) -> dict[int, np.ndarray]:
        w = self.world
        snap = w.snapshot()
        out = {}
        for s in self.cfg.views:
            if s == 3:
                r = Renderer(make_camera(3, self.cfg, None, eef=w.p, yaw=float(w.rpy[2])), self.cfg)
            else:
                r = self.renderers[s]
            t = min(w.t, self.cfg.max_steps + 1)
            out[s] = r.render(snap, self.distract if distractors else None, s, t,
                              self.noise_rng if noise else None, self.cfg.noise_sigma)
        return out

    def _obs(self) -> dict[str, Any]:
        return {"images": self.render() if self.render_obs else {}, "state": self.world.state(),
                "instruction": self.world.instruction()}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
        self.world.step(action, self.cfg.blocking)
        succ = self.world.success()
        done = succ or self.world.t >= self.cfg.max_steps
        return self._obs(), {"success": bool(succ), "done": bool(done), "t": self.world.t}

    def success(self) -> bool:
        return bool(self.world.success())

    def task_id(self) -> str:
        return self.world.task_id()


class Policy(Protocol):
    def reset(self, instruction: str) -> None: ...

    def act(self, obs: dict[str, Any]) -> np.ndarray: ...


def task_list(cfg: SimConfig, n: int, seed: int) -> list[str]:
    """`n` task ids drawn from scenes sampled with `seed` (for per-task evaluation)."""
    out: list[str] = []
    i = 0
    while len(out) < n and i < 100 * n:
        w = World(cfg, stream(seed, "tasklist", i))
        if w.task_id() not in out:
            out.append(w.task_id())
        i += 1
    return out


def evaluate(policy: Policy, cfg: SimConfig | dict, n_episodes_per_task: int, max_steps: int, seeds: list[int],
             tasks: list[str] | None = None) -> dict[str, Any]:
    """Closed-loop success rate. Evaluation episode seeds are offset by 10**6 from data-generation ones.

    A policy with `reset_batch(instructions)` and `act_batch(observations, episode_indices) -> actions`
    (the observations and indices of the episodes still running) runs all episodes of a seed in lockstep, one environment each (the same episode seeds, so the same
    scenes; one batched model call per step instead of one per episode); other policies run episode by
    episode. A policy with `uses_images = False` (the scripted expert, a random policy) gets observations
    without images: nothing is rendered for it, and its outcomes are the same as with images."""
    cfg = cfg if isinstance(cfg, SimConfig) else SimConfig.from_dict(cfg)
    cfg = SimConfig(**{**cfg.__dict__, "max_steps": max_steps})
    images = bool(getattr(policy, "uses_images", True))
    tasks = tasks or task_list(cfg, 3, 10**6 + 1)
    per_task: dict[str, list[bool]] = {t: [] for t in tasks}
    steps = []
    batched = hasattr(policy, "act_batch") and hasattr(policy, "reset_batch") and not hasattr(policy, "bind")
    for seed in seeds:
        if batched:
            for task, ok, t in _run_batched(policy, cfg, seed, tasks, n_episodes_per_task, images):
                per_task[task].append(ok)
                steps.append(t)
            continue
        env = TabletopSim(cfg, 10**6 + seed, render_obs=images)
        if hasattr(policy, "bind"):  # privileged policies (the scripted expert) read the world
            policy.bind(env)
        for ti, task in enumerate(tasks):
            for e in range(n_episodes_per_task):
                obs = env.reset(task_id=task, episode_seed=ti * 10**4 + e)
                policy.reset(obs["instruction"])
                info = {"success": False, "done": False, "t": 0}
                while not info["done"]:
                    obs, info = env.step(policy.act(obs))
                per_task[task].append(info["success"])
                steps.append(info["t"])
    allv = [s for v in per_task.values() for s in v]
    return {"success_rate": float(np.mean(allv)), "per_task": {k: float(np.mean(v)) for k, v in per_task.items()},
            "mean_steps": float(np.mean(steps))}


def _run_batched(policy: Any, cfg: SimConfig, seed: int, tasks: list[str],
                 n_episodes_per_task: int, images: bool = True) -> list[tuple[str, bool, int]]:
    """Every (task, episode) of one evaluation seed in lockstep; (task, success, steps) in episode order."""
    env0 = TabletopSim(cfg, 10**6 + seed)
    keys = [(ti, task, e) for ti, task in enumerate(tasks) for e in range(n_episodes_per_task)]
    envs, obs = [], []
    for ti, task, e in keys:
        # the seed's cameras, as one env would have
        env = TabletopSim(cfg, 10**6 + seed, cameras=env0.cameras, render_obs=images)
        obs.append(env.reset(task_id=task, episode_seed=ti * 10**4 + e))
        envs.append(env)
    policy.reset_batch([o["instruction"] for o in obs])
    result: list[dict[str, Any] | None] = [None] * len(envs)
    active = list(range(len(envs)))
    while active:
        acts = policy.act_batch([obs[i] for i in active], active)
        still = []
        for i, a in zip(active, acts):
            obs[i], info = envs[i].step(a)
            if info["done"]:
                result[i] = info
            else:
                still.append(i)
        active = still
    return [(task, bool(r["success"]), int(r["t"])) for (_, task, _), r in zip(keys, result)]  # type: ignore[index]


class ExpertPolicy:
    """The scripted expert as a Policy (reads the world through the env; for sanity checks only)."""

    uses_images = False  # acts on the world's state: `evaluate` renders nothing for it

    def __init__(self, env: TabletopSim | None = None, seed: int = 0):
        self.env, self.seed, self.n = env, seed, 0

    def bind(self, env: TabletopSim) -> None:
        self.env = env

    def reset(self, instruction: str) -> None:
        self.expert = Expert(stream(self.seed, "expert_policy", self.n), noise=0.0)
        self.n += 1

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        return self.expert.act(self.env.world)
