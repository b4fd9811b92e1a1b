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
from dataclasses import dataclass
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
@dataclass
class Instance:
    task: int
    p0: np.ndarray
    goal: np.ndarray
    yaw: float
    L: float
    a: float  # obstacle position along the start->goal axis (canonical)
    d: float  # obstacle lateral offset (canonical) -> non-affine path change
    obstacle: np.ndarray  # world centre of its base
    via: np.ndarray  # world via-point above the obstacle

    @property
    def Rc(self) -> np.ndarray:
        return rot_z(self.yaw)


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
    return Instance(task, p0, goal, yaw, L, a, d, obst, via)


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
    hit = bool(np.any((horiz < OBST_R * inst.L) & (dense[:, 2] < inst.obstacle[2] + OBST_H * inst.L)))
    via = _seg_dist(P, inst.via)
    ok = final < 0.05 * inst.L and not hit and via < 0.1 * inst.L
    return {"success": bool(ok), "final_err_rel": final / inst.L, "collided": hit, "via_err_rel": via / inst.L}


def path_error(inst: Instance, P_pred: np.ndarray, M: int = 32) -> float:
    """Normalised path error: mean pointwise distance of arc-length-resampled paths / L (positions only)."""
    I3 = np.repeat(np.eye(3)[None], len(P_pred), 0)
    Pt = true_path(inst)
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


def run_path(inst: Instance, P: np.ndarray, Rs: np.ndarray, v_max: float, max_steps: int) -> np.ndarray:
    """Projection controller (spec e.1): project the pose onto the path -> s*, target
    Gamma(min(1, s* + v_max / L_path)), clipped delta action. Returns the executed positions."""
    seg = np.linalg.norm(np.diff(P, axis=0), axis=1)
    Lp = max(float(seg.sum()), 1e-9)
    s = np.concatenate([[0.0], np.cumsum(seg)]) / Lp
    p, R = inst.p0.copy(), inst.Rc.copy()
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
        p = p + _clip(tgt - p, v_max)
        R = exp_so3(_clip(log_so3(Rt @ R.T), 0.1)) @ R
        out.append(p.copy())
        if st >= 1.0 and np.linalg.norm(P[-1] - p) < 1e-3 * inst.L:
            break
    return np.array(out)


def run_timed(inst: Instance, P: np.ndarray, T_demo: float, v_max: float, max_steps: int) -> np.ndarray:
    """Time-indexed tracking: waypoint at normalised time min(1, t / T_demo), clipped delta action."""
    u = np.linspace(0, 1, len(P))
    p = inst.p0.copy()
    out = [p.copy()]
    for t in range(1, max_steps + 1):
        x = min(1.0, t / T_demo)
        tgt = np.array([np.interp(x, u, P[:, c]) for c in range(3)])
        p = p + _clip(tgt - p, v_max)
        out.append(p.copy())
        if x >= 1.0 and np.linalg.norm(P[-1] - p) < 1e-3 * inst.L:
            break
    return np.array(out)


# --------------------------------------------------------------------------------- representations
def _ridge(X: np.ndarray, Y: np.ndarray) -> Any:
    from sklearn.linear_model import RidgeCV

    return RidgeCV(alphas=(1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)).fit(X, Y)  # efficient LOO on the demos


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


def fit_methods(demos: list[tuple[Instance, np.ndarray, np.ndarray]], M: int, n_comp: int, seed: int) -> dict[str, Any]:
    """Fit every representation of spec e.2 on the demos of one seed."""
    out: dict[str, Any] = {}
    Fa = np.stack([abs_features(i) for i, _, _ in demos])
    arc = [arc_length_resample(P, R, M, i.L)[:2] for i, P, R in demos]
    tim = [time_resample(P, R, M) for i, P, R in demos]
    flat = lambda pr: np.concatenate([pr[0], np.stack([log_so3(r) for r in pr[1]])], 1).ravel()  # noqa: E731
    out["abs_time"] = _ridge(Fa, np.stack([flat(x) for x in tim]))
    out["abs_arc"] = _ridge(Fa, np.stack([flat(x) for x in arc]))
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
    for inst, P, _ in demos:
        for t in range(len(P) - 1):
            X.append(np.concatenate([P[t], inst.goal, inst.obstacle, [t / T_demo]]))
            Y.append((P[t + 1] - P[t]) * 100)
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out["bc_mlp"] = make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=500,
                                                                 random_state=seed)).fit(np.array(X), np.array(Y))
    out["T_demo"] = T_demo
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


def run_bc(fit: dict[str, Any], inst: Instance, v_max: float, max_steps: int) -> np.ndarray:
    p = inst.p0.copy()
    out = [p.copy()]
    for t in range(max_steps):
        x = np.concatenate([p, inst.goal, inst.obstacle, [t / fit["T_demo"]]])
        p = p + _clip(fit["bc_mlp"].predict(x[None])[0] / 100, v_max)
        out.append(p.copy())
        if np.linalg.norm(inst.goal - p) < 1e-3 * inst.L:
            break
    return np.array(out)


def rollout(fit: dict[str, Any], method: str, inst: Instance, speed: float, M: int) -> tuple[np.ndarray, float]:
    """Closed-loop execution of one method; returns (executed positions, normalised path error)."""
    v_max = speed * fit["v_demo"] * inst.L
    max_steps = int(math.ceil(3 * fit["T_demo"] / speed))
    if method == "bc_mlp":
        P = run_bc(fit, inst, v_max, max_steps)
        return P, path_error(inst, P, M)
    Pp, Rp = predict_path(fit, method, inst, M)
    perr = path_error(inst, Pp, M)
    if method in ("abs_time", "canon_time"):
        return run_timed(inst, Pp, fit["T_demo"], v_max, max_steps), perr
    return run_path(inst, Pp, Rp, v_max, max_steps), perr


def conditions(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tr = {"yaw": (-0.4, 0.4), "scale": (0.8, 1.2), "shift": (0.0, 0.0, 0.0), "offset": tuple(p["train_offset"]),
          "speed": 1.0}
    return {"train_like": tr, "speed_0.5x": {**tr, "speed": 0.5}, "speed_2x": {**tr, "speed": 2.0},
            "pose": {**tr, "yaw": (1.0, 2.2), "scale": (1.5, 2.5), "shift": (0.3, 0.3, 0.05)},
            "nonaffine": {**tr, "offset": tuple(p["test_offset"])}}


def run_seed(p: dict[str, Any], seed: int) -> dict[str, Any]:
    """One seed: demos (n_demos per task), fit every method, closed-loop test on every condition."""
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
