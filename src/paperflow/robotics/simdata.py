"""Write simulator episodes as a Bridge V2 raw tree (spec b.5), plus a truth tree beside it.

Layout (mirrors the real data exactly)::

    <raw_root>/sim/<env>/<task>/00/<YYYY-MM-DD_HH-MM-SS>/
        config.json                  {"agent": {"env": ["TabletopSimEnv", {"camera_topics": [...]}]}}
        collection_metadata.json
        raw/traj_group0/traj<i>/
            images<k>/im_<t>.jpg     one folder per camera, in config.json topic order
            obs_dict.pkl             full_state (N,7), time_stamp (N,), qpos/qvel/... placeholders
            policy_out.pkl           list of {actions (7,), new_robot_transform, delta_robot_transform, policy_type}
                                     (or, legacy form, a plain list of (7,) arrays)
            agent_data.pkl           traj_ok, term_t (never read by the extractor)
            lang.txt                 instruction, then "confidence: 1"
    <raw_root>/../truth/<same relative dated path>/raw/traj_group0/traj<i>.npz

Counts: N frames, N states, N-1 actions. Legacy sessions (dated before 2021-07-23) reproduce
Bridge's one-step camera delay: frame/state index t records world t-1 (index 0 duplicates world 0)
and actions are written undelayed plus one trailing action, so the extractor's shift restores
alignment with the truth.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from paperflow.core.seeding import stream
from paperflow.robotics.sim import SLOT_TOPICS, Expert, Renderer, SimConfig, World, Distractors, make_camera, \
    session_cameras

TEMPLATE_FOLDERS = {"put": "put_object_on_plate", "push": "push_object_sideways", "lift": "lift_object",
                    "carry": "carry_over_obstacle"}  # carry: the GAM obstacle course (course.py)


def _transform(state: np.ndarray) -> np.ndarray:
    """4x4 pose of a 7-D state (xyz + rpy)."""
    r, p, y = state[3:6]
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    R = np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                  [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                  [-sp, cp * sr, cp * cr]])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, state[:3]
    return T


def rollout(cfg: SimConfig, seed: int, ep: int, cameras: dict, max_steps: int, extra_steps: int = 2,
            template: str | None = None) -> dict[str, Any]:
    """Run the scripted expert (non-blocking dynamics) and render every world frame in every view."""
    rng = stream(seed, "episode", ep)
    cfg_t = SimConfig(**{**cfg.__dict__, "templates": (template,) if template else cfg.templates})
    world = World(cfg_t, rng)
    expert = Expert(stream(seed, "expert", ep))
    distract = Distractors(cfg.distractors, cfg.distractor_strength, max_steps + 2, stream(seed, "distract", ep),
                           cfg.width, cfg.height)
    noise = stream(seed, "pixel_noise", ep)
    renderers = {s: Renderer(c, cfg) for s, c in cameras.items()}
    states, snaps, cmds, objpos = [world.state()], [world.snapshot()], [], [np.stack([o.pos for o in world.objs])]
    succ_t = None
    for t in range(max_steps):
        a = expert.act(world)
        world.step(a, blocking=False)
        cmds.append(a)
        states.append(world.state())
        snaps.append(world.snapshot())
        objpos.append(np.stack([o.pos for o in world.objs]))
        if world.success() and succ_t is None:
            succ_t = t + 1
        if succ_t is not None and t + 1 >= succ_t + extra_steps:
            break
    frames: dict[int, list[np.ndarray]] = {s: [] for s in cfg.views}
    cams_t: dict[int, list[np.ndarray]] = {}
    for t, snap in enumerate(snaps):
        for s in cfg.views:
            if s == 3:
                cam = make_camera(3, cfg, None, eef=snap["p"], yaw=float(snap["rpy"][2]))
                cams_t.setdefault(3, []).append(np.concatenate([cam.R.ravel(), cam.eye]))
                r = Renderer(cam, cfg)
            else:
                r = renderers[s]
            frames[s].append(r.render(snap, distract, s, t, noise, cfg.noise_sigma))
    return {"world": world, "states": np.stack(states), "commanded": np.stack(cmds), "objpos": np.stack(objpos),
            "frames": frames, "distract": distract, "success": bool(world.success()), "instruction": world.instruction(),
            "task_id": world.task_id(), "kappa": world.kappa, "wrist_poses": {k: np.stack(v) for k, v in cams_t.items()}}


def _jpeg(img: np.ndarray, path: Path, quality: int = 95) -> None:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    path.write_bytes(buf.getvalue())


def write_trajectory(traj_dir: Path, truth_path: Path, roll: dict[str, Any], folder_slots: list[int], legacy: bool,
                     legacy_policy_out: bool, cameras: dict) -> None:
    traj_dir.mkdir(parents=True, exist_ok=True)
    states, cmds = roll["states"], roll["commanded"]
    T = len(cmds)
    idx = np.arange(T + 1)
    actions = cmds
    if legacy:  # index t records world t-1; index 0 duplicates world 0; one extra trailing action
        idx = np.concatenate([[0], idx])
        actions = np.concatenate([cmds, cmds[-1:] * np.array([0, 0, 0, 0, 0, 0, 1.0])])
    N = len(idx)
    for k, slot in enumerate(folder_slots):
        d = traj_dir / f"images{k}"
        d.mkdir(exist_ok=True)
        for t, wi in enumerate(idx):
            _jpeg(roll["frames"][slot][wi], d / f"im_{t}.jpg")
    fs = states[idx]
    obs = {"full_state": fs, "state": fs[:, :6].copy(), "qpos": np.zeros((N, 6)), "qvel": np.zeros((N, 6)),
           "joint_effort": np.zeros((N, 6)), "desired_state": fs.copy(),
           "time_stamp": 1.6e9 + 0.2 * np.arange(N), "eef_transform": np.stack([_transform(s) for s in fs]),
           "high_bound": np.array([0.45, 0.25, 0.25, 1.57, 1.57, 3.14, 1.0]),
           "low_bound": np.array([0.10, -0.15, -0.01, -1.57, -1.57, -3.14, 0.0]),
           "env_done": np.zeros(N, dtype=bool), "t_get_obs": 0.2 * np.arange(N)}
    with open(traj_dir / "obs_dict.pkl", "wb") as f:
        pickle.dump(obs, f, protocol=2)
    if legacy_policy_out:
        pol: list[Any] = [a.copy() for a in actions]
    else:
        pol = []
        for t, a in enumerate(actions):
            cur = fs[min(t, N - 1)]
            nxt = cur.copy()
            nxt[:6] += a[:6]
            pol.append({"actions": a.copy(), "new_robot_transform": _transform(nxt),
                        "delta_robot_transform": np.linalg.solve(_transform(cur), _transform(nxt)),
                        "policy_type": "VRTeleopPolicy"})
    with open(traj_dir / "policy_out.pkl", "wb") as f:
        pickle.dump(pol, f, protocol=2)
    with open(traj_dir / "agent_data.pkl", "wb") as f:
        pickle.dump({"traj_ok": roll["success"], "term_t": T}, f, protocol=2)
    (traj_dir / "lang.txt").write_text(f"{roll['instruction']}\nconfidence: 1\n")
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    truth = {"world_state": states, "commanded": cmds, "reached": np.diff(states[:, :6], axis=0),
             "object_pos": roll["objpos"], "success": np.array(roll["success"]), "kappa": np.array(roll["kappa"]),
             "task_id": np.array(roll["task_id"]), "instruction": np.array(roll["instruction"]),
             "folder_slots": np.array(folder_slots), "legacy": np.array(legacy)}
    for s, cam in cameras.items():
        truth[f"cam{s}/K"], truth[f"cam{s}/R"], truth[f"cam{s}/eye"] = cam.K, cam.R, cam.eye
    for s, v in roll["wrist_poses"].items():
        truth[f"cam{s}/R_eye_per_frame"] = v
    for k, v in roll["distract"].params.items():
        truth[f"distractor/{k}"] = v
    np.savez(truth_path, **truth)


def generate(raw_root: str | Path, p: dict[str, Any]) -> dict[str, Any]:
    """Generate `p["n_sessions"] x p["episodes_per_session"]` episodes under `raw_root`.

    `p`: the study's `sim` params (see the schema). Returns counts for the manifest.
    """
    raw_root = Path(raw_root)
    truth_root = raw_root.parent / "truth"
    cfg = SimConfig.from_dict({**p["render"], "max_steps": p["max_steps"]})
    seed = int(p["seed"])
    rng = stream(seed, "sessions")
    base = dt.datetime(2022, 3, 1, 9, 0, 0)
    legacy_base = dt.datetime(2021, 5, 3, 9, 0, 0)
    counts = {"episodes": 0, "sessions": 0, "legacy_sessions": 0, "successes": 0, "frames": 0}
    ep = 0
    for si in range(p["n_sessions"]):
        legacy = bool(rng.random() < p["legacy_fraction"])
        date = (legacy_base if legacy else base) + dt.timedelta(days=si, minutes=int(rng.integers(0, 600)))
        template = cfg.templates[si % len(cfg.templates)]
        sess = raw_root / "sim" / "tabletop_sim" / TEMPLATE_FOLDERS[template] / "00" / date.strftime("%Y-%m-%d_%H-%M-%S")
        cams = session_cameras(cfg, stream(seed, "cameras", si))
        slots = list(cfg.views)
        if p.get("folder_order"):
            slots = list(p["folder_order"])
        elif p["permute_topics"]:
            rest = [s for s in slots if s != 0]
            slots = ([0] if 0 in slots else []) + list(rng.permutation(rest))
        slots = [int(s) for s in slots]
        config = {"agent": {"env": ["TabletopSimEnv", {"camera_topics": [SLOT_TOPICS[s] for s in slots],
                                                        "image_size": [cfg.height, cfg.width]}]},
                  "simulator": {"distractor_strength": cfg.distractor_strength, "template": template}}
        sess.mkdir(parents=True, exist_ok=True)
        (sess / "config.json").write_text(json.dumps(config, indent=1))
        (sess / "collection_metadata.json").write_text(json.dumps({"robot": "sim", "date": str(date)}))
        for i in range(p["episodes_per_session"]):
            roll = rollout(cfg, seed, ep, cams, p["max_steps"], template=template)
            rel = sess.relative_to(raw_root) / "raw" / "traj_group0"
            use_legacy_pol = bool(rng.random() < p["legacy_policy_out_fraction"])
            write_trajectory(raw_root / rel / f"traj{i}", truth_root / rel / f"traj{i}.npz", roll, slots, legacy,
                             use_legacy_pol, cams)
            counts["episodes"] += 1
            counts["successes"] += int(roll["success"])
            counts["frames"] += len(roll["states"])
            ep += 1
        counts["sessions"] += 1
        counts["legacy_sessions"] += int(legacy)
    return counts
