"""GAM — RECONSTRUCTION (no official code; spec e is built from the abstract only).

SE(3) utilities, arc-length reparameterisation, canonical-frame "world lines", the schema + PCA
residual factorisation, the projection controller, the baselines of spec e.2 and the closed-loop
experiment of spec e.3 in a state-only pose simulator (no rendering).

The pose simulator here (`sample_instance`, `demo`, `run_path`, `outcome`) is our own: the robotics simulator's `World` has no obstacles,
via-points or state-only API, so the e.3 task (move from start to goal over an obstacle, through a
via-point above it) is a pure-kinematics SE(3) end effector stepped with clipped delta actions
(`[dp (3), d_rotvec (3)]`, rotation applied in the world frame; metres / radians per step).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.seeding import stream

L0 = 0.3  # nominal start->goal distance (m) of the training demos
LAMBDA_R = 0.05  # m / rad (spec e.1)


# ------------------------------------------------------------------------------------------ SE(3)
def hat(w: np.ndarray) -> np.ndarray:
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0.0]])


def vee(W: np.ndarray) -> np.ndarray:
    return np.array([W[2, 1], W[0, 2], W[1, 0]])


def exp_so3(w: np.ndarray) -> np.ndarray:
    """Rodrigues, with series coefficients as theta -> 0."""
    th = float(np.linalg.norm(w))
    W = hat(w)
    if th < 1e-6:
        A, B = 1 - th**2 / 6 + th**4 / 120, 0.5 - th**2 / 24 + th**4 / 720
    else:
        A, B = math.sin(th) / th, (1 - math.cos(th)) / th**2
    return np.eye(3) + A * W + B * W @ W


def log_so3(R: np.ndarray) -> np.ndarray:
    """Rotation vector; series near 0, symmetric-part method near pi."""
    v = vee(R - R.T) / 2  # = sin(theta) n
    c = float(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0))
    s = float(np.linalg.norm(v))
    th = math.atan2(s, c)
    if th < 1e-6:
        return v * (1 + th**2 / 6)  # theta / sin(theta) series
    if th > math.pi - 1e-2:
        M = ((R + R.T) / 2 - c * np.eye(3)) / (1 - c)  # = n n^T
        i = int(np.argmax(np.diag(M)))
        n = M[:, i] / math.sqrt(max(M[i, i], 1e-300))
        if float(n @ v) < 0:
            n = -n
        return th * n / np.linalg.norm(n)
    return th / s * v


def _V_coeffs(th: float) -> tuple[float, float]:
    if th < 1e-5:
        return 0.5 - th**2 / 24, 1 / 6 - th**2 / 120
    return (1 - math.cos(th)) / th**2, (th - math.sin(th)) / th**3


def exp_se3(xi: np.ndarray) -> np.ndarray:
    """xi = (rho, omega) -> 4x4 [exp(omega^), V rho]."""
    rho, w = xi[:3], xi[3:]
    th = float(np.linalg.norm(w))
    W = hat(w)
    B, C = _V_coeffs(th)
    T = np.eye(4)
    T[:3, :3] = exp_so3(w)
    T[:3, 3] = (np.eye(3) + B * W + C * W @ W) @ rho
    return T


def log_se3(T: np.ndarray) -> np.ndarray:
    w = log_so3(T[:3, :3])
    th = float(np.linalg.norm(w))
    W = hat(w)
    B, C = _V_coeffs(th)
    V = np.eye(3) + B * W + C * W @ W
    return np.concatenate([np.linalg.solve(V, T[:3, 3]), w])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


# ------------------------------------------------------------------------------------- arc length
def arc_length_resample(P: np.ndarray, Rs: np.ndarray, M: int, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resample a pose path at M uniform arc-length values.

    Segment length sqrt(|dp|^2 + (lambda_r * scale/L0)^2 |log(R_i^T R_i+1)|^2); segments shorter than
    1 mm * scale/L0 are merged (dwell removed). [recon/deviation] lambda_r and the 1 mm threshold
    scale with the instance scale L so that the parameterisation is exactly scale-invariant.
    Returns (positions (M,3), rotations (M,3,3), timing law s_i of the kept input points).
    """
    k = scale / L0
    lam = LAMBDA_R * k
    keep_p, keep_R = [P[0]], [Rs[0]]
    for i in range(1, len(P)):
        d = math.sqrt(float(np.sum((P[i] - keep_p[-1]) ** 2)) + lam**2 * float(
            np.sum(log_so3(keep_R[-1].T @ Rs[i]) ** 2)))
        if d >= 1e-3 * k or i == len(P) - 1:
            if d < 1e-3 * k and len(keep_p) > 1:  # final point too close: replace the last kept one
                keep_p[-1], keep_R[-1] = P[i], Rs[i]
            else:
                keep_p.append(P[i])
                keep_R.append(Rs[i])
    P2, R2 = np.array(keep_p), np.array(keep_R)
    rel = [log_so3(R2[i].T @ R2[i + 1]) for i in range(len(P2) - 1)]
    seg = np.array([math.sqrt(float(np.sum((P2[i + 1] - P2[i]) ** 2)) + lam**2 * float(np.sum(rel[i] ** 2)))
                    for i in range(len(P2) - 1)])
    if len(seg) == 0 or seg.sum() <= 0:
        return np.repeat(P2[:1], M, 0), np.repeat(R2[:1], M, 0), np.zeros(len(P2))
    s = np.concatenate([[0.0], np.cumsum(seg)]) / seg.sum()
    out_p, out_R = np.zeros((M, 3)), np.zeros((M, 3, 3))
    for j, sj in enumerate(np.linspace(0, 1, M)):
        i = min(int(np.searchsorted(s, sj, side="right")) - 1, len(seg) - 1)
        a = 0.0 if seg[i] == 0 else (sj - s[i]) / (s[i + 1] - s[i])
        out_p[j] = P2[i] + a * (P2[i + 1] - P2[i])
        out_R[j] = R2[i] @ exp_so3(a * rel[i])
    return out_p, out_R, s


def time_resample(P: np.ndarray, Rs: np.ndarray, M: int) -> tuple[np.ndarray, np.ndarray]:
    """Resample at M uniform *normalised time* values (the time-indexed representations)."""
    u = np.linspace(0, len(P) - 1, M)
    out_p, out_R = np.zeros((M, 3)), np.zeros((M, 3, 3))
    for j, x in enumerate(u):
        i = min(int(x), len(P) - 2)
        a = x - i
        out_p[j] = P[i] + a * (P[i + 1] - P[i])
        out_R[j] = Rs[i] @ exp_so3(a * log_so3(Rs[i].T @ Rs[i + 1]))
    return out_p, out_R


# --------------------------------------------------------------------------------- canonical frame
def canonical_frame(p_start: np.ndarray, p_goal: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(p_c, R_c, L): origin at the start, x along the horizontal start->goal direction, z up."""
    d = p_goal - p_start
    x = np.array([d[0], d[1], 0.0])
    x = x / np.linalg.norm(x)
    z = np.array([0, 0, 1.0])
    y = np.cross(z, x)
    return p_start.copy(), np.stack([x, y, z], 1), float(np.linalg.norm(d))


def world_line(P: np.ndarray, Rs: np.ndarray, pc: np.ndarray, Rc: np.ndarray, L: float) -> np.ndarray:
    """xi(s_j) = (R_c^T (p - p_c) / L, log(R_c^T R)^vee), decoupled R^3 x so(3): (M, 6)."""
    return np.concatenate([(P - pc) @ Rc / L, np.stack([log_so3(Rc.T @ R) for R in Rs])], 1)


def from_world_line(xi: np.ndarray, pc: np.ndarray, Rc: np.ndarray, L: float) -> tuple[np.ndarray, np.ndarray]:
    """p = p_c + L R_c p~, R = R_c exp(omega~^)."""
    return pc + L * xi[:, :3] @ Rc.T, np.stack([Rc @ exp_so3(w) for w in xi[:, 3:]])


# ----------------------------------------------------------------------------------- the task
# An instance of the task is a `robotics.api.CourseScene` (task, start, goal, yaw, L, obstacle offsets a and d,
# obstacle base, via-point; its obstacle radius and height as fractions of L): the tabletop world's scenes and
# the pose world's instances are the same record.
Instance = Any


OBST_H, OBST_R, CLEAR = 0.15, 0.08, 0.10  # canonical units (x L)
TASK_YAW = (0.6, -0.4, 0.9)  # per-task yaw twist along the path (rad)


def _g(u: np.ndarray, a: float) -> np.ndarray:
    return np.where(u < a, 0.5 * u / a, 0.5 + 0.5 * (u - a) / (1 - a))


def canonical_curve(u: np.ndarray, task: int, a: float, d: float, noise: np.ndarray | None = None) -> np.ndarray:
    """The true demo curve in canonical coordinates (x, y, z, omega) at curve parameter u in [0, 1]."""
    b = np.sin(np.pi * _g(u, a)) ** 2
    x = u
    y = d * b
    z = (OBST_H + CLEAR) * b ** (1 + 2 * abs(d))  # the hump narrows as |d| grows: not a similarity map
    if noise is not None:
        y = y + noise[0] * np.sin(2 * np.pi * u)
        z = z + noise[1] * np.sin(np.pi * u) ** 2
    om = np.stack([0.2 * b, 0.1 * b, TASK_YAW[task % len(TASK_YAW)] * u], 1)
    return np.concatenate([np.stack([x, y, z], 1), om], 1)


def sample_instance(rng: np.random.Generator, task: int, cond: dict[str, Any]) -> Instance:
    yaw = float(rng.uniform(*cond["yaw"]))
    L = L0 * float(rng.uniform(*cond["scale"]))
    p0 = np.array([0.2, 0.0, 0.05]) + rng.uniform(-0.05, 0.05, 3) * np.array([1, 1, 0.2]) + np.array(cond["shift"])
    a = float(rng.uniform(0.4, 0.6))
    lo, hi = cond["offset"]
    d = float(rng.uniform(lo, hi)) * (1 if rng.random() < 0.5 else -1)
    Rc = rot_z(yaw)
    goal = p0 + L * Rc @ np.array([1.0, 0, 0])
    obst = p0 + L * Rc @ np.array([a, d, 0.0])
    via = p0 + L * Rc @ np.array([a, d, OBST_H + CLEAR])
    from paperflow.robotics.api import CourseScene

    return CourseScene(task, p0, goal, yaw, L, a, d, obst, via, OBST_R, OBST_H)


def demo(rng: np.random.Generator, inst: Instance, base_steps: int, speed_range: tuple[float, float],
         noise: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """A demonstration: the task curve under a random monotone time-warp (8 log-normal segment speeds
    x a global speed), sampled once per control step. Returns world (positions (N,3), rotations (N,3,3))."""
    v = np.exp(rng.normal(0, 0.3, 8)) * rng.uniform(*speed_range)
    seg_t = (base_steps / 8) / v
    T = np.concatenate([[0.0], np.cumsum(seg_t)])
    n = int(math.ceil(T[-1]))
    t = np.append(np.arange(n), T[-1])
    u = np.interp(t, T, np.linspace(0, 1, 9))
    xi = canonical_curve(u, inst.task, inst.a, inst.d, rng.normal(0, noise, 2))
    return from_world_line(xi, inst.p0, inst.Rc, inst.L)


def true_path(inst: Instance, n: int = 400) -> np.ndarray:
    xi = canonical_curve(np.linspace(0, 1, n), inst.task, inst.a, inst.d)
    return from_world_line(xi, inst.p0, inst.Rc, inst.L)[0]


def _seg_dist(P: np.ndarray, q: np.ndarray) -> float:
    """Min distance from point q to the polyline P."""
    if len(P) == 1:
        return float(np.linalg.norm(P[0] - q))
    A, B = P[:-1], P[1:]
    AB = B - A
    t = np.clip(np.einsum("ij,ij->i", q - A, AB) / np.maximum(np.einsum("ij,ij->i", AB, AB), 1e-18), 0, 1)
    return float(np.min(np.linalg.norm(A + t[:, None] * AB - q, axis=1)))


def outcome(inst: Instance, P: np.ndarray) -> dict[str, Any]:
    """Spec e.3 success: final error < 0.05 L, obstacle cleared, via-point within 0.1 L."""
    final = float(np.linalg.norm(P[-1] - inst.goal))
    dense = np.concatenate([P[i] + np.linspace(0, 1, 5, endpoint=False)[:, None] * (P[i + 1] - P[i])
                            for i in range(len(P) - 1)] + [P[-1:]]) if len(P) > 1 else P
    horiz = np.linalg.norm(dense[:, :2] - inst.obstacle[:2], axis=1)
    hit = bool(np.any((horiz < inst.obst_r) & (dense[:, 2] < inst.obstacle[2] + inst.obst_h)))
    via = _seg_dist(P, inst.via)
    ok = final < 0.05 * inst.L and not hit and via < 0.1 * inst.L
    return {"success": bool(ok), "final_err_rel": final / inst.L, "collided": hit, "via_err_rel": via / inst.L}


def path_error(inst: Any, P_pred: np.ndarray, M: int = 32, Pt: np.ndarray | None = None) -> float:
    """Normalised path error: mean pointwise distance of arc-length-resampled paths / L (positions only);
    the reference is `Pt` (default: the pose simulator's true curve of `inst`)."""
    I3 = np.repeat(np.eye(3)[None], len(P_pred), 0)
    Pt = true_path(inst) if Pt is None else Pt
    a, _, _ = arc_length_resample(P_pred, I3, M, inst.L)
    b, _, _ = arc_length_resample(Pt, np.repeat(np.eye(3)[None], len(Pt), 0), M, inst.L)
    return float(np.mean(np.linalg.norm(a - b, axis=1)) / inst.L)


# ----------------------------------------------------------------------------------- controllers
def _clip(v: np.ndarray, m: float) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v if n <= m else v * (m / n)


def project(P: np.ndarray, s: np.ndarray, q: np.ndarray, s_min: float) -> float:
    """Arc-length parameter of the closest point to q on the polyline segments with s >= s_min."""
    A, B = P[:-1], P[1:]
    AB = B - A
    t = np.clip(np.einsum("ij,ij->i", q - A, AB) / np.maximum(np.einsum("ij,ij->i", AB, AB), 1e-18), 0, 1)
    d = np.linalg.norm(A + t[:, None] * AB - q, axis=1)
    d[s[1:] < s_min] = np.inf
    k = int(np.argmin(d))
    return float(s[k] + t[k] * (s[k + 1] - s[k]))


class KinematicPlant:
    """The pose simulator's end effector: p <- p + dp, R <- exp(clip(log(R_t R^T), 0.1)) R (no bounds)."""

    def __init__(self, inst: Any):
        self.p, self.R = inst.p0.copy(), inst.Rc.copy()

    @property
    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        return self.p.copy(), self.R.copy()

    def step(self, dp: np.ndarray, R_target: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        self.p = self.p + dp
        if R_target is not None:
            self.R = exp_so3(_clip(log_so3(R_target @ self.R.T), 0.1)) @ self.R
        return self.pose


def run_path(inst: Any, P: np.ndarray, Rs: np.ndarray, v_max: float, max_steps: int,
             plant: Any = None) -> np.ndarray:
    """Projection controller (spec e.1): project the pose onto the path -> s*, target
    Gamma(min(1, s* + v_max / L_path)), clipped delta action. Returns the executed positions.
    `plant` executes the actions (default: the pose simulator's kinematics)."""
    plant = KinematicPlant(inst) if plant is None else plant
    seg = np.linalg.norm(np.diff(P, axis=0), axis=1)
    Lp = max(float(seg.sum()), 1e-9)
    s = np.concatenate([[0.0], np.cumsum(seg)]) / Lp
    p, R = plant.pose
    out = [p.copy()]
    s_prev = 0.0
    for _ in range(max_steps):
        s_star = max(s_prev, project(P, s, p, s_prev - 0.05))
        s_prev = s_star
        st = min(1.0, s_star + v_max / Lp)
        k = min(int(np.searchsorted(s, st, side="right")) - 1, len(s) - 2)
        a = 0.0 if s[k + 1] == s[k] else (st - s[k]) / (s[k + 1] - s[k])
        tgt = P[k] + a * (P[k + 1] - P[k])
        Rt = Rs[k] @ exp_so3(a * log_so3(Rs[k].T @ Rs[k + 1]))
        p, R = plant.step(_clip(tgt - p, v_max), Rt)
        out.append(p.copy())
        if st >= 1.0 and np.linalg.norm(P[-1] - p) < 1e-3 * inst.L:
            break
    return np.array(out)


def run_timed(inst: Any, P: np.ndarray, T_demo: float, v_max: float, max_steps: int,
              plant: Any = None, Rs: np.ndarray | None = None) -> np.ndarray:
    """Time-indexed tracking: waypoint at normalised time min(1, t / T_demo), clipped delta action
    (with `Rs`, the orientation at that time is the rotation target; the pose simulator tracks position only)."""
    plant = KinematicPlant(inst) if plant is None else plant
    u = np.linspace(0, 1, len(P))
    p, _ = plant.pose
    out = [p.copy()]
    for t in range(1, max_steps + 1):
        x = min(1.0, t / T_demo)
        tgt = np.array([np.interp(x, u, P[:, c]) for c in range(3)])
        Rt = None
        if Rs is not None:
            j = min(int(x * (len(P) - 1)), len(P) - 2)
            f = x * (len(P) - 1) - j
            Rt = Rs[j] @ exp_so3(f * log_so3(Rs[j].T @ Rs[j + 1]))
        p, _ = plant.step(_clip(tgt - p, v_max), Rt)
        out.append(p.copy())
        if x >= 1.0 and np.linalg.norm(P[-1] - p) < 1e-3 * inst.L:
            break
    return np.array(out)


# --------------------------------------------------------------------------------- representations
def _ridge(X: np.ndarray, Y: np.ndarray, standardize: bool = False) -> Any:
    """RidgeCV (efficient LOO over the demos); `standardize`: z-score the features first, so the penalty
    does not depend on their units (world coordinates in metres are ~0.1 and get over-shrunk otherwise),
    and choose the penalty per output (positions and rotations differ in scale and in noise)."""
    from sklearn.linear_model import RidgeCV

    r = RidgeCV(alphas=(1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0), alpha_per_target=standardize)
    if standardize:
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), r).fit(X, Y)
    return r.fit(X, Y)


def abs_features(inst: Instance) -> np.ndarray:
    return np.concatenate([inst.p0, inst.goal, inst.obstacle])


def canon_features(inst: Instance) -> np.ndarray:
    o = (inst.obstacle - inst.p0) @ inst.Rc / inst.L
    return o[:2]


class Factorised:
    """Schema (per-task mean world line) + PCA residual with coefficients from canonical obstacle coords."""

    def __init__(self, lines: dict[int, list[np.ndarray]], feats: dict[int, list[np.ndarray]], n_comp: int,
                 residual: bool):
        self.mean, self.comp, self.pred = {}, {}, {}
        for k, ls in lines.items():
            X = np.stack([x.ravel() for x in ls])
            self.mean[k] = X.mean(0)
            r = min(n_comp, len(ls) - 1)
            if residual and r > 0:
                _, _, Vt = np.linalg.svd(X - self.mean[k], full_matrices=False)
                self.comp[k] = Vt[:r]
                c = (X - self.mean[k]) @ Vt[:r].T
                self.pred[k] = _ridge(np.stack(feats[k]), c)
        self.shape = ls[0].shape

    def line(self, task: int, f: np.ndarray) -> np.ndarray:
        x = self.mean[task].copy()
        if task in self.comp:
            x = x + self.pred[task].predict(f[None])[0] @ self.comp[task]
        return x.reshape(self.shape)


METHODS = ("abs_time", "bc_mlp", "abs_arc", "canon_time", "gam_nores", "gam")


def bc_input(p: np.ndarray, inst: Any, t: int, T_demo: float, kind: str) -> np.ndarray:
    """The closed-loop BC MLP's input from (state, goal, obstacle, t/T) (spec e.2): `world` = the raw world
    coordinates; `relative` = the same quantities as offsets from the end effector (goal − p, obstacle − p),
    with the phase t/T capped at 1 (the demos' hold at the goal, not an extrapolation in time)."""
    if kind == "world":
        return np.concatenate([p, inst.goal, inst.obstacle, [t / T_demo]])
    if kind == "relative":
        return np.concatenate([p, inst.goal - p, inst.obstacle - p, [min(1.0, t / T_demo)]])
    raise ValueError(f"unknown BC input {kind!r}")


def bc_features(fit: dict[str, Any], p: np.ndarray, inst: Any, t: int) -> np.ndarray:
    return bc_input(p, inst, t, fit["T_demo"], fit.get("bc_input", "world"))


def fit_methods(demos: list[tuple[Any, np.ndarray, np.ndarray]], M: int, n_comp: int, seed: int,
                bc_kind: str = "world", bc_hidden: tuple[int, ...] = (64, 64),
                actions: list[np.ndarray] | None = None, standardize: bool = False) -> dict[str, Any]:
    """Fit every representation of spec e.2 on the demos of one seed.

    `actions` (per demo, (N−1, ≥3) commanded Bridge actions): the BC MLP learns the commanded Δp; without
    them it learns the reached Δp (the pose simulator, where both are the same). `standardize`: the absolute
    methods' ridge z-scores its world features."""
    out: dict[str, Any] = {}
    Fa = np.stack([abs_features(i) for i, _, _ in demos])
    arc = [arc_length_resample(P, R, M, i.L)[:2] for i, P, R in demos]
    tim = [time_resample(P, R, M) for i, P, R in demos]
    flat = lambda pr: np.concatenate([pr[0], np.stack([log_so3(r) for r in pr[1]])], 1).ravel()  # noqa: E731
    out["abs_time"] = _ridge(Fa, np.stack([flat(x) for x in tim]), standardize)
    out["abs_arc"] = _ridge(Fa, np.stack([flat(x) for x in arc]), standardize)
    lines_a: dict[int, list] = {}
    lines_t: dict[int, list] = {}
    feats: dict[int, list] = {}
    for (inst, _, _), pa, pt in zip(demos, arc, tim):
        pc, Rc, L = canonical_frame(inst.p0, inst.goal)
        lines_a.setdefault(inst.task, []).append(world_line(pa[0], pa[1], pc, Rc, L))
        lines_t.setdefault(inst.task, []).append(world_line(pt[0], pt[1], pc, Rc, L))
        feats.setdefault(inst.task, []).append(canon_features(inst))
    out["gam"] = Factorised(lines_a, feats, n_comp, True)
    out["gam_nores"] = Factorised(lines_a, feats, n_comp, False)
    out["canon_time"] = Factorised(lines_t, feats, n_comp, True)
    # closed-loop BC MLP: (state, goal, obstacle, t/T) -> delta position
    from sklearn.neural_network import MLPRegressor

    T_demo = float(np.mean([len(P) - 1 for _, P, _ in demos]))
    X, Y = [], []
    for j, (inst, P, _) in enumerate(demos):
        for t in range(len(P) - 1):
            X.append(bc_input(P[t], inst, t, T_demo, bc_kind))
            Y.append((P[t + 1] - P[t] if actions is None else actions[j][t, :3]) * 100)
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out["bc_mlp"] = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=tuple(bc_hidden), max_iter=500,
                                                                 random_state=seed)).fit(np.array(X), np.array(Y))
    out["T_demo"] = T_demo
    out["bc_input"] = bc_kind
    out["v_demo"] = float(np.mean([np.linalg.norm(np.diff(P, axis=0), axis=1).sum() / inst.L / (len(P) - 1)
                                   for inst, P, _ in demos]))
    return out


def predict_path(fit: dict[str, Any], method: str, inst: Instance, M: int) -> tuple[np.ndarray, np.ndarray]:
    if method in ("abs_time", "abs_arc"):
        y = fit[method].predict(abs_features(inst)[None])[0].reshape(M, 6)
        return y[:, :3], np.stack([exp_so3(w) for w in y[:, 3:]])
    xi = fit[method].line(inst.task, canon_features(inst))
    pc, Rc, L = canonical_frame(inst.p0, inst.goal)
    return from_world_line(xi, pc, Rc, L)


def run_bc(fit: dict[str, Any], inst: Any, v_max: float, max_steps: int, plant: Any = None,
           stop_after: int = 0) -> np.ndarray:
    """Closed-loop BC. Ends at max_steps, within 1e-3 L of the goal, or (stop_after > 0) when the policy's own
    commanded step has stayed below 0.1 v_max for stop_after steps (it has stopped, as its demos do)."""
    plant = KinematicPlant(inst) if plant is None else plant
    p, _ = plant.pose
    out = [p.copy()]
    still = 0
    for t in range(max_steps):
        x = bc_features(fit, p, inst, t)
        dp = _clip(fit["bc_mlp"].predict(x[None])[0] / 100, v_max)
        p, _ = plant.step(dp, None)
        out.append(p.copy())
        still = still + 1 if float(np.linalg.norm(dp)) < 0.1 * v_max else 0
        if stop_after and still >= stop_after:
            break
        if np.linalg.norm(inst.goal - p) < 1e-3 * inst.L:
            break
    return np.array(out)


def rollout(fit: dict[str, Any], method: str, inst: Any, speed: float, M: int, plant: Any = None,
            Pt: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Closed-loop execution of one method; returns (executed positions, normalised path error).

    `plant` runs the actions (default: the pose simulator; `api.CoursePlant`: the shared tabletop simulator,
    where the time-indexed methods also track the orientation); `Pt` is the reference path of the error."""
    v_max = speed * fit["v_demo"] * inst.L
    max_steps = int(math.ceil(3 * fit["T_demo"] / speed))
    if method == "bc_mlp":
        P = run_bc(fit, inst, v_max, max_steps, plant, 3 if plant is not None else 0)
        return P, path_error(inst, P, M, Pt)
    Pp, Rp = predict_path(fit, method, inst, M)
    perr = path_error(inst, Pp, M, Pt)
    if method in ("abs_time", "canon_time"):
        return run_timed(inst, Pp, fit["T_demo"], v_max, max_steps, plant, Rp if plant is not None else None), perr
    return run_path(inst, Pp, Rp, v_max, max_steps, plant), perr


def conditions(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tr = {"yaw": (-0.4, 0.4), "scale": (0.8, 1.2), "shift": (0.0, 0.0, 0.0), "offset": tuple(p["train_offset"]),
          "speed": 1.0}
    return {"train_like": tr, "speed_0.5x": {**tr, "speed": 0.5}, "speed_2x": {**tr, "speed": 2.0},
            "pose": {**tr, "yaw": (1.0, 2.2), "scale": (1.5, 2.5), "shift": (0.3, 0.3, 0.05)},
            "nonaffine": {**tr, "offset": tuple(p["test_offset"])}}


def run_seed(p: dict[str, Any], seed: int, data: str | Path | None = None) -> dict[str, Any]:
    """One seed: demos (n_demos per task), fit every method, closed-loop test on every condition.
    `p["world"]`: `tabletop` (the shared simulator's obstacle course, recorded demos; read from the extracted
    dataset `data` when given) or `pose` (the state-only pose simulator of this module, demos drawn from the
    task curve)."""
    if p.get("world", "pose") == "tabletop":
        return run_seed_tabletop(p, seed, data)
    conds = conditions(p)
    rng = stream(seed, "gam", "demos")
    demos = []
    for task in range(p["n_tasks"]):
        for _ in range(p["n_demos"]):
            inst = sample_instance(rng, task, conds["train_like"])
            P, R = demo(rng, inst, p["demo_steps"], (0.8, 1.25), p["demo_noise"])
            demos.append((inst, P, R))
    fit = fit_methods(demos, p["M"], p["n_components"], seed)
    res: dict[str, Any] = {"seed": seed, "T_demo": fit["T_demo"], "conditions": {}}
    for cname, cond in conds.items():
        trng = stream(seed, "gam", "test", cname)
        insts = [sample_instance(trng, int(trng.integers(p["n_tasks"])), cond) for _ in range(p["n_test"])]
        per: dict[str, Any] = {}
        for m in p["methods"]:
            rows = []
            for inst in insts:
                P, perr = rollout(fit, m, inst, cond["speed"], p["M"])
                rows.append({**outcome(inst, P), "path_err": perr, "steps": len(P) - 1, "abs_d": abs(inst.d)})
            per[m] = {"success": [r["success"] for r in rows], "path_err": [r["path_err"] for r in rows],
                      "final_err_rel": [r["final_err_rel"] for r in rows], "steps": [r["steps"] for r in rows],
                      "collided": [r["collided"] for r in rows], "via_err_rel": [r["via_err_rel"] for r in rows],
                      "abs_d": [r["abs_d"] for r in rows]}
        res["conditions"][cname] = per
    # one example rollout per method (first pose-shift instance) for the figure
    inst = sample_instance(stream(seed, "gam", "example"), 0, conds["pose"])
    res["example"] = {"true": true_path(inst, 60)[:, :2].tolist(), "obstacle": inst.obstacle[:2].tolist(),
                      "radius": OBST_R * inst.L, "via": inst.via[:2].tolist(),
                      "paths": {m: rollout(fit, m, inst, 1.0, p["M"])[0][:, :2].tolist() for m in p["methods"]}}
    return res


# ------------------------------------------------------------------- the shared tabletop simulator
# (robotics' obstacle course, reached only through paperflow.robotics.api)
def tabletop_conditions(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Spec e.3's conditions inside the simulator's workspace. Training: yaw ∈ [−0.4, 0.4], scale ∈ [0.8, 1.2],
    start in a box near the robot; pose: yaw ∈ [1.0, 2.2], scale ∈ [1.5, 2.5], start anywhere it fits."""
    tr = {"yaw": (-0.4, 0.4), "scale": (0.8, 1.2), "start": ((0.12, -0.05), (0.20, 0.10)),
          "offset": tuple(p["train_offset"]), "speed": 1.0}
    return {"train_like": tr, "speed_0.5x": {**tr, "speed": 0.5}, "speed_2x": {**tr, "speed": 2.0},
            "pose": {**tr, "yaw": (1.0, 2.2), "scale": (1.5, 2.5), "start": ((0.10, -0.15), (0.45, 0.25))},
            "nonaffine": {**tr, "offset": tuple(p["test_offset"])}}


def tabletop_records(p: dict[str, Any], seed: int) -> list[tuple[Any, dict[str, Any]]]:
    """n_demos recorded expert demonstrations per task of one seed: (scene, the simulator's recording)."""
    from paperflow.robotics import api

    cond = tabletop_conditions(p)["train_like"]
    rng = stream(seed, "gam", "tabletop", "demos")
    out = []
    for task in range(p["n_tasks"]):
        for _ in range(p["n_demos"]):
            sc = api.course_sample_scene(rng, task, cond, p["L0"])
            out.append((sc, api.course_record_demo(sc, rng, (0.8, 1.25), p["expert_noise"])))
    return out


def tabletop_demos(p: dict[str, Any], seed: int) -> list[tuple[Any, np.ndarray, np.ndarray, np.ndarray]]:
    """The recorded demos of one seed in memory: (scene, positions, rotations, commanded actions)."""
    return [(sc, r["positions"], r["rotations"], r["action"]) for sc, r in tabletop_records(p, seed)]


def session_key(seed: int, task: int) -> str:
    return f"seed{seed}_task{task}"


def tabletop_sessions(p: dict[str, Any], seeds: list[int]) -> dict[str, list[tuple[Any, dict[str, Any]]]]:
    """Every seed's demos grouped into one raw-tree session per (seed, task), in recording order."""
    out: dict[str, list] = {}
    for seed in seeds:
        for sc, rec in tabletop_records(p, seed):
            out.setdefault(session_key(seed, sc.task), []).append((sc, rec))
    return out


def load_tabletop_demos(mv_dir: str | Path, seed: int) -> list[tuple[Any, np.ndarray, np.ndarray, np.ndarray]]:
    """One seed's demos read back from the extracted dataset (every split: all are demonstrations; the test
    scenes are drawn in closed loop): state -> positions and rotations, action_raw -> commanded actions, the
    scene geometry from `scenes.json` (the perception of the tiny profile). Ordered by (task, index)."""
    import json

    from paperflow.robotics import api

    index = json.loads((Path(mv_dir) / "scenes.json").read_text())
    rows = []
    for split in ("train", "val", "test"):
        ds = api.load_split(mv_dir, split)
        for i in range(len(ds)):
            ep = ds[i]
            meta = index[str(ep["source_rel_path"])]
            sc = api.course_scene_from_json(meta["scene"])
            if meta["session"] != session_key(seed, sc.task):
                continue
            S = np.asarray(ep["state"], np.float64)
            rows.append(((sc.task, int(meta["index"])), (sc, S[:, :3].copy(),
                                                         np.stack([api.course_rpy_to_R(x[3:6]) for x in S]),
                                                         np.asarray(ep["action_raw"], np.float64))))
    if not rows:
        raise ValueError(f"{mv_dir}: no demonstrations of seed {seed}")
    return [r for _, r in sorted(rows, key=lambda t: t[0])]


def fit_tabletop(p: dict[str, Any], demos: list[tuple[Any, np.ndarray, np.ndarray, np.ndarray]], seed: int) -> dict[str, Any]:
    return fit_methods([d[:3] for d in demos], p["M"], p["n_components"], seed, p["bc_input"], tuple(p["bc_hidden"]),
                       actions=[d[3] for d in demos], standardize=True)


def tabletop_rows(fit: dict[str, Any], methods: list[str], scenes: list[Any], speed: float, M: int) -> dict[str, Any]:
    """Closed-loop results of every method on the given scenes (the lists run_seed writes)."""
    from paperflow.robotics import api

    refs = [api.course_reference_path(sc) for sc in scenes]
    keys = ("success", "path_err", "final_err_rel", "steps", "collided", "via_err_rel", "abs_d")
    per: dict[str, Any] = {}
    for m in methods:
        rows = []
        for sc, Pt in zip(scenes, refs):
            P, perr = rollout(fit, m, sc, speed, M, api.CoursePlant(sc), Pt)
            rows.append({**outcome(sc, P), "path_err": perr, "steps": len(P) - 1, "abs_d": abs(sc.d)})
        per[m] = {k: [r[k] for r in rows] for k in keys}
    return per


def run_seed_tabletop(p: dict[str, Any], seed: int, data: str | Path | None = None) -> dict[str, Any]:
    """run_seed in the shared simulator: the seed's recorded demos (read from the extracted dataset `data`,
    else recorded in memory), every method fitted, closed loop through the simulator's blocking step."""
    from paperflow.robotics import api

    conds = tabletop_conditions(p)
    demos = load_tabletop_demos(data, seed) if data is not None else tabletop_demos(p, seed)
    fit = fit_tabletop(p, demos, seed)
    res: dict[str, Any] = {"seed": seed, "T_demo": fit["T_demo"], "world": "tabletop", "conditions": {},
                           "demo_lengths": [len(d[1]) - 1 for d in demos],
                           "demos_from": "extracted dataset" if data is not None else "memory"}
    for cname, cond in conds.items():
        trng = stream(seed, "gam", "tabletop", "test", cname)
        scenes = [api.course_sample_scene(trng, int(trng.integers(p["n_tasks"])), cond, p["L0"])
                  for _ in range(p["n_test"])]
        res["conditions"][cname] = tabletop_rows(fit, p["methods"], scenes, cond["speed"], p["M"])
    sc = api.course_sample_scene(stream(seed, "gam", "tabletop", "example"), 0, conds["pose"], p["L0"])
    ref = api.course_reference_path(sc)
    res["example"] = {"true": ref[:, :2].tolist(), "obstacle": sc.obstacle[:2].tolist(),
                      "radius": sc.obst_r, "via": sc.via[:2].tolist(),
                      "paths": {m: rollout(fit, m, sc, 1.0, p["M"], api.CoursePlant(sc), ref)[0][:, :2].tolist()
                                for m in p["methods"]}}
    return res
