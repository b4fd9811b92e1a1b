"""Bridge V2 raw-tree extractor -> multi-view episode dataset (HF `datasets` Arrow), spec a.1-a.6.

Reads `<root>/<collection>/<env>/<task>/<NN>/<YYYY-MM-DD_HH-MM-SS>/{raw,scripted_raw}/traj_group*/traj*/`
(real BridgeData V2 or the simulator's output; same code). Per trajectory: camera topics from the
session's `config.json` -> view slots; `images<k>/im_<t>.jpg` sorted by integer t; pickles through
`paperflow.robotics.pickles` only; the pre-2021-07-23 latency shift; count checks; gripper
binarisation and relabelling from reached states; resize; deterministic session-level split.
Everything dropped or repaired is counted in `manifest.json` with a reason.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from PIL import Image

from paperflow.robotics.pickles import UnsafePickleError, load_obs_dict, load_policy_out

log = logging.getLogger(__name__)

N_SLOTS = 4
LATENCY_CUTOFF = dt.datetime(2021, 7, 23)
DEFAULT_TOPICS = ["/D435/color/image_raw", "/blue/image_raw", "/yellow/image_raw", "/wrist/image_raw"]
FIXED_TOPICS = {"/cam0/image_raw", "/camera0/color/image_raw", "/D435/color/image_raw"}
SIDE_TOPICS = {"/blue/image_raw", "/yellow/image_raw"} | {f"/cam{i}/image_raw" for i in range(1, 5)} | {
    f"/camera{i}/color/image_raw" for i in range(1, 5)}
WRIST_TOPICS = {"/wrist/image_raw"}
SPLITS = ("train", "val", "test")


class DropTrajectory(Exception):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


# ------------------------------------------------------------------------------ tree walking
def _is_dated(name: str) -> bool:
    try:
        dt.datetime.strptime(name, "%Y-%m-%d_%H-%M-%S")
    except ValueError:
        return False
    return True


def scan_sessions(root: str | Path, depth: int = 5, extra_depths: tuple[int, ...] | list[int] = (),
                  scan_depth: int = 8) -> dict[str, Any]:
    """Every dated folder (`%Y-%m-%d_%H-%M-%S`) at most `scan_depth` levels below `root`.

    `depth` is the converters' `--depth` (5: `<collection>/<env>/<task>/<NN>/<date>`); sessions at one of
    `extra_depths` are read too (e.g. 6 for the pre-2021 `bridge_data_v1/berkeley/<scene>/<task>/<n>/<date>`
    layout). Nothing is skipped silently: a dated folder at any other depth, and any path containing
    `lmdb` (skipped by every converter), is returned in `skipped` with its reason, and every session read
    at a depth other than `depth` is listed in `other_depth` (the extractor logs a warning for each).
    The walk never descends into a dated folder.
    """
    root = Path(root)
    read_depths = {int(depth), *(int(d) for d in extra_depths)}
    sessions: list[Path] = []
    other_depth: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []

    def walk(d: Path, level: int) -> None:
        try:
            children = sorted(c for c in d.iterdir() if c.is_dir())
        except OSError as e:  # unreadable folder: recorded, not ignored
            skipped.append({"path": str(d.relative_to(root)), "depth": level, "reason": "unreadable_folder",
                            "detail": repr(e)})
            return
        for c in children:
            rel = str(c.relative_to(root))
            if "lmdb" in c.name:
                skipped.append({"path": rel, "depth": level + 1, "reason": "lmdb_path"})
                continue
            if _is_dated(c.name):
                if level + 1 in read_depths:
                    sessions.append(c)
                    if level + 1 != depth:
                        other_depth.append({"path": rel, "depth": level + 1, "read": True})
                else:
                    skipped.append({"path": rel, "depth": level + 1, "reason": "session_at_unexpected_depth"})
                    other_depth.append({"path": rel, "depth": level + 1, "read": False})
                continue
            if level + 1 < scan_depth:
                walk(c, level + 1)

    if root.is_dir():
        walk(root, 0)
    return {"sessions": sessions, "other_depth": other_depth, "skipped": skipped}


def find_sessions(root: str | Path, depth: int = 5, extra_depths: tuple[int, ...] | list[int] = (),
                  scan_depth: int = 8) -> list[Path]:
    """The dated folders `scan_sessions` would read (depth 5 by default, as the converters)."""
    return scan_sessions(root, depth, extra_depths, scan_depth)["sessions"]


def _int_suffix(p: Path, prefix: str) -> int:
    m = re.fullmatch(rf"{prefix}(\d+)", p.name)
    return int(m.group(1)) if m else -1


def find_trajectories(session: Path) -> list[Path]:
    trajs = []
    for raw in ("raw", "scripted_raw"):
        for g in sorted((session / raw).glob("traj_group*"), key=lambda p: _int_suffix(p, "traj_group")):
            trajs += sorted((t for t in g.glob("traj*") if t.is_dir() and _int_suffix(t, "traj") >= 0),
                            key=lambda p: _int_suffix(p, "traj"))
    return trajs


def camera_topics(session: Path) -> list[str]:
    cfg = session / "config.json"
    if not cfg.exists():
        return list(DEFAULT_TOPICS)
    c = json.loads(cfg.read_text())
    return list(c["agent"]["env"][1]["camera_topics"])


def topics_to_slots(topics: list[str]) -> dict[int, int]:
    """folder index k -> view slot (a.2). Raises DropTrajectory on an unknown or misplaced topic."""
    mapping: dict[int, int] = {}
    side = 0
    for k, t in enumerate(topics):
        if t in FIXED_TOPICS:
            if k != 0:
                raise DropTrajectory("fixed_camera_not_images0", f"{t} at images{k}")
            slot = 0
        elif t in SIDE_TOPICS:
            side += 1
            if side > 2:
                continue  # more side cameras than slots: keep the first two
            slot = side
        elif t in WRIST_TOPICS:
            slot = 3
        else:
            raise DropTrajectory("unknown_camera_topic", t)
        if slot in mapping.values():
            raise DropTrajectory("duplicate_view_slot", t)
        mapping[k] = slot
        if len(mapping) == N_SLOTS:
            break
    return mapping


def read_language(traj: Path) -> tuple[str, list[str], bool]:
    f = traj / "lang.txt"
    if not f.exists():
        return "", [], False
    lines = [ln.strip() for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return "", [], False
    alts = [ln for ln in lines[1:] if not ln.lower().startswith("confidence")]
    return lines[0], alts, True


# ------------------------------------------------------------------------------ processing steps
def binarize_gripper(g: np.ndarray, hi: float = 0.95, lo: float = 0.05) -> tuple[np.ndarray, bool]:
    """Open (1) if g > hi, closed (0) if g < lo; intermediate values take the next settled command
    (reverse scan, carry starting at the raw last value). Returns (binarised, ends_mid_transition)."""
    g = np.asarray(g, dtype=np.float64)
    out = np.empty_like(g)
    if len(g) == 0:
        return out, False
    carry = g[-1]
    ends_mid = not (g[-1] > hi or g[-1] < lo)
    for i in range(len(g) - 1, -1, -1):
        if g[i] > hi:
            carry = 1.0
        elif g[i] < lo:
            carry = 0.0
        out[i] = carry
    return out, ends_mid


def relabel_actions(state: np.ndarray, action_raw: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """a_rel[t,0:6] = state[t+1,0:6] - state[t,0:6] (rotation wrapped to (-pi, pi]); a_rel[t,6] =
    binarised gripper. Returns (a_rel, #wrapped angle values, ends_mid_transition)."""
    d = np.diff(state[:, :6], axis=0)
    rot = d[:, 3:6]
    wrapped = np.mod(rot + np.pi, 2 * np.pi) - np.pi
    wrapped = np.where(wrapped == -np.pi, np.pi, wrapped)
    n_wrapped = int(np.sum(np.abs(wrapped - rot) > 1e-12))
    d[:, 3:6] = wrapped
    g, mid = binarize_gripper(action_raw[:, 6])
    return np.concatenate([d, g[:, None]], axis=1), n_wrapped, mid


def resize(img: np.ndarray, size: int, mode: str) -> np.ndarray:
    im = Image.fromarray(img)
    if mode == "center_crop":
        w, h = im.size
        s = min(w, h)
        im = im.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s))
    elif mode != "squash":
        raise ValueError(f"unknown resize_mode '{mode}'")
    return np.asarray(im.resize((size, size), Image.Resampling.LANCZOS), dtype=np.uint8)


def split_of(rel_session: str, cuts: tuple[float, float] | list[float] = (0.8, 0.9)) -> str:
    """sha1(relative dated path) -> [0,1): < cuts[0] train, < cuts[1] val, else test (spec: 0.8 / 0.9)."""
    u = int(hashlib.sha1(rel_session.encode()).hexdigest(), 16) / 16**40
    return "train" if u < cuts[0] else ("val" if u < cuts[1] else "test")


@dataclass
class ExtractParams:
    image_size: int = 64
    resize_mode: str = "squash"
    require_views: list[int] = field(default_factory=lambda: [0, 1])
    keep_single_view: bool = False
    drop_first_step: bool = False
    min_frames: int = 2
    depth: int = 5
    extra_depths: list[int] = field(default_factory=lambda: [6])
    split_cuts: list[float] = field(default_factory=lambda: [0.8, 0.9])
    scan_depth: int = 8

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ExtractParams":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def _frame_indices(folder: Path) -> dict[int, Path]:
    out = {}
    for f in folder.glob("im_*.jpg"):
        m = re.fullmatch(r"im_(\d+)\.jpg", f.name)
        if m:
            out[int(m.group(1))] = f
    return out


def _load_jpeg(path: Path) -> np.ndarray | None:
    try:
        with Image.open(path) as im:
            im.load()
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError):
        return None


def extract_trajectory(traj: Path, session: Path, root: Path, p: ExtractParams, stats: Counter) -> dict[str, Any]:
    """One trajectory -> one episode record (unnormalised). Raises DropTrajectory with a reason."""
    topics = camera_topics(session)
    folders = sorted((d for d in traj.glob("images*") if re.fullmatch(r"images\d+", d.name)),
                     key=lambda d: _int_suffix(d, "images"))
    if not folders:
        raise DropTrajectory("empty", "no images<k> folders")
    n_folders = max(_int_suffix(d, "images") for d in folders) + 1
    if n_folders > len(topics):
        raise DropTrajectory("unknown_camera_topic", f"images{n_folders - 1} has no topic in config.json")
    mapping = topics_to_slots(topics)  # a listed camera whose folder is absent is a missing view
    frames_idx: dict[int, dict[int, Path]] = {}
    for k, slot in mapping.items():
        d = traj / f"images{k}"
        idx = _frame_indices(d) if d.is_dir() else {}
        if idx:
            frames_idx[slot] = idx
        else:
            stats["missing_view_folders"] += 1
            log.warning("%s: view slot %d (images%d, %s) missing or empty", traj, slot, k, topics[k])
    if not frames_idx:
        raise DropTrajectory("empty", "no frames in any view")
    lengths = {s: max(ix) + 1 for s, ix in frames_idx.items()}
    if len(set(lengths.values())) != 1:
        raise DropTrajectory("view_length_mismatch", str(lengths))
    N = next(iter(lengths.values()))
    if not (traj / "obs_dict.pkl").exists():
        raise DropTrajectory("missing_obs_dict")
    if not (traj / "policy_out.pkl").exists():
        raise DropTrajectory("missing_policy_out")
    try:
        obs = load_obs_dict(traj / "obs_dict.pkl")
        actions = load_policy_out(traj / "policy_out.pkl")
    except UnsafePickleError as e:
        log.error("refused pickle: %s", e)
        raise DropTrajectory("unsafe_or_invalid_pickle", str(e)) from None
    state, ts = obs["full_state"], obs["time_stamp"]
    if len(state) != len(ts):
        raise DropTrajectory("count_mismatch", f"full_state {len(state)} vs time_stamp {len(ts)}")
    date = dt.datetime.strptime(session.name, "%Y-%m-%d_%H-%M-%S")
    shifted = date < LATENCY_CUTOFF
    t0 = 1 if shifted else 0
    if shifted:
        state, ts, actions = state[1:], ts[1:], actions[:-1]
    n_img = N - t0
    if not (n_img == len(state) == len(actions) + 1):
        raise DropTrajectory("count_mismatch", f"images {n_img}, state {len(state)}, actions {len(actions)}"
                                               f"{' after latency shift' if shifted else ''}")
    if n_img < p.min_frames:
        raise DropTrajectory("too_short", f"{n_img} frames")
    has_view = np.zeros(N_SLOTS, bool)
    for s in frames_idx:
        has_view[s] = True
    missing_req = [v for v in p.require_views if not has_view[v]]
    if missing_req and not p.keep_single_view:
        raise DropTrajectory("missing_required_view", f"slots {missing_req}")
    S = p.image_size
    images = np.zeros((n_img, N_SLOTS, S, S, 3), np.uint8)
    frame_ok = np.zeros((N_SLOTS, n_img), bool)
    for s, idx in frames_idx.items():
        for t in range(n_img):
            f = idx.get(t + t0)
            if f is None:
                stats["missing_jpegs"] += 1
                log.warning("%s: view %d frame %d missing", traj, s, t + t0)
                continue
            img = _load_jpeg(f)
            if img is None:
                stats["corrupt_jpegs"] += 1
                log.warning("%s: unreadable or truncated JPEG %s", traj, f)
                continue
            small = resize(img, S, p.resize_mode)
            images[t, s] = small
            frame_ok[s, t] = small.std() >= 2.0
            if not frame_ok[s, t]:
                stats["constant_frames"] += 1
    action_rel, n_wrapped, mid = relabel_actions(state, actions)
    first_zero = bool(np.all(actions[0, :6] == 0))
    if p.drop_first_step:
        images, frame_ok, state, ts = images[1:], frame_ok[:, 1:], state[1:], ts[1:]
        actions, action_rel = actions[1:], action_rel[1:]
    instr, alts, has_lang = read_language(traj)
    slot_topics = [""] * N_SLOTS
    orig_folder = np.full(N_SLOTS, -1, np.int8)
    for k, s in mapping.items():
        slot_topics[s] = topics[k]
        orig_folder[s] = k
    rel = traj.relative_to(root)
    return {
        "episode_id": hashlib.sha1(str(rel).encode()).hexdigest()[:16], "images": images,
        "has_view": has_view, "frame_ok": frame_ok, "state": state.astype(np.float32),
        "time_stamp": ts.astype(np.float64), "action_raw": actions.astype(np.float32),
        "action_rel": action_rel.astype(np.float32), "instruction": instr, "instruction_alts": alts,
        "has_language": has_lang, "camera_topics": slot_topics, "orig_folder": orig_folder,
        "source_rel_path": str(rel), "date": session.name, "latency_shifted": shifted,
        "first_action_is_zero": first_zero, "gripper_ends_mid_transition": mid, "n_wrapped": n_wrapped,
    }


def features(image_size: int) -> Any:
    import datasets as hfd

    S = image_size
    return hfd.Features({
        "episode_id": hfd.Value("string"),
        "images": hfd.Array5D(shape=(None, N_SLOTS, S, S, 3), dtype="uint8"),
        "has_view": hfd.Sequence(hfd.Value("bool"), length=N_SLOTS),
        "frame_ok": hfd.Sequence(hfd.Sequence(hfd.Value("bool")), length=N_SLOTS),
        "state": hfd.Array2D(shape=(None, 7), dtype="float32"),
        "time_stamp": hfd.Sequence(hfd.Value("float64")),
        "action_raw": hfd.Array2D(shape=(None, 7), dtype="float32"),
        "action_rel": hfd.Array2D(shape=(None, 7), dtype="float32"),
        "instruction": hfd.Value("string"),
        "instruction_alts": hfd.Sequence(hfd.Value("string")),
        "has_language": hfd.Value("bool"),
        "camera_topics": hfd.Sequence(hfd.Value("string"), length=N_SLOTS),
        "orig_folder": hfd.Sequence(hfd.Value("int8"), length=N_SLOTS),
        "source_rel_path": hfd.Value("string"),
        "date": hfd.Value("string"),
        "latency_shifted": hfd.Value("bool"),
        "first_action_is_zero": hfd.Value("bool"),
        "gripper_ends_mid_transition": hfd.Value("bool"),
        "task": hfd.Value("string"),
    })


def _record_for_arrow(ep: dict[str, Any], task: str) -> dict[str, Any]:
    r = {k: v for k, v in ep.items() if k != "n_wrapped"}
    r["frame_ok"] = [row.tolist() for row in ep["frame_ok"]]
    r["has_view"] = ep["has_view"].tolist()
    r["orig_folder"] = ep["orig_folder"].tolist()
    r["time_stamp"] = ep["time_stamp"].tolist()
    r["task"] = task
    return r


def iter_episodes(root: Path, p: ExtractParams, stats: Counter, drops: Counter, drop_log: list,
                  sessions_log: dict[str, Any] | None = None) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(split, episode, task folder) for every kept trajectory; drops are counted with reasons.

    `sessions_log` (filled in place) receives the session scan: folders read at another depth than
    `p.depth` and folders skipped, each with a reason and a logged warning.
    """
    scan = scan_sessions(root, p.depth, p.extra_depths, p.scan_depth)
    for o in scan["other_depth"]:
        log.warning("dated session folder %s at depth %d (expected %d): %s", o["path"], o["depth"], p.depth,
                    "read" if o["read"] else "SKIPPED (depth not in extract.depth / extract.extra_depths)")
    for sk in scan["skipped"]:
        if sk["reason"] != "session_at_unexpected_depth":
            log.warning("skipped %s: %s", sk["path"], sk["reason"])
    stats["sessions_found"] += len(scan["sessions"]) + sum(
        1 for sk in scan["skipped"] if sk["reason"] == "session_at_unexpected_depth")
    for sk in scan["skipped"]:
        stats[f"skipped_{sk['reason']}"] += 1
    if sessions_log is not None:
        sessions_log.update({"depth": p.depth, "extra_depths": list(p.extra_depths), "scan_depth": p.scan_depth,
                             "other_depth": scan["other_depth"], "skipped": scan["skipped"]})
    for session in scan["sessions"]:
        rel_session = str(session.relative_to(root))
        split = split_of(rel_session, p.split_cuts)
        stats["sessions_read"] += 1
        trajs = find_trajectories(session)
        if not trajs:
            drops["empty_session"] += 1
            drop_log.append({"path": rel_session, "reason": "empty_session",
                             "detail": "no {raw,scripted_raw}/traj_group*/traj* folders"})
            log.warning("session %s has no trajectories", rel_session)
        for traj in trajs:
            stats["trajectories_seen"] += 1
            try:
                ep = extract_trajectory(traj, session, root, p, stats)
            except DropTrajectory as e:
                drops[e.reason] += 1
                drop_log.append({"path": str(traj.relative_to(root)), "reason": e.reason, "detail": e.detail})
                log.warning("dropped %s: %s %s", traj, e.reason, e.detail)
                continue
            except (json.JSONDecodeError, KeyError, IndexError) as e:
                drops["bad_config_json"] += 1
                drop_log.append({"path": str(traj.relative_to(root)), "reason": "bad_config_json", "detail": repr(e)})
                log.warning("dropped %s: bad_config_json %r", traj, e)
                continue
            stats["latency_shifted"] += int(ep["latency_shifted"])
            stats["wrapped_angles"] += ep["n_wrapped"]
            stats["gripper_ends_mid_transition"] += int(ep["gripper_ends_mid_transition"])
            stats["first_action_is_zero"] += int(ep["first_action_is_zero"])
            stats[f"views_{''.join(str(int(b)) for b in ep['has_view'])}"] += 1
            stats[f"kept_{split}"] += 1
            fo = ep["frame_ok"][ep["has_view"]]
            stats["frames_read"] += int(fo.size)
            stats["frames_masked"] += int((~fo).sum())
            stats["episodes_with_masked_frames"] += int((~fo).any())
            # the task folder sits two levels above the dated folder at any depth (<task>/<NN>/<date>)
            yield split, ep, session.relative_to(root).parts[-3]


def extract_summary(stats: Counter, drops: Counter, sessions_log: dict[str, Any], kept: dict[str, int]) -> dict:
    """What was read, masked and skipped, and why (the manifest's `summary`)."""
    masked_why = {k: int(stats.get(k, 0)) for k in ("missing_jpegs", "corrupt_jpegs", "constant_frames")}
    return {
        "sessions": {"found": int(stats.get("sessions_found", 0)), "read": int(stats.get("sessions_read", 0)),
                     "read_at_other_depth": sum(1 for o in sessions_log.get("other_depth", []) if o["read"]),
                     "skipped": dict(Counter(s["reason"] for s in sessions_log.get("skipped", [])))},
        "trajectories": {"seen": int(stats.get("trajectories_seen", 0)), "kept": int(sum(kept.values())),
                         "dropped": int(sum(drops.values()) - drops.get("empty_session", 0)),
                         "dropped_why": {k: int(v) for k, v in drops.items() if k != "empty_session"}},
        "frames": {"read": int(stats.get("frames_read", 0)), "masked": int(stats.get("frames_masked", 0)),
                   "masked_why": masked_why, "missing_view_folders": int(stats.get("missing_view_folders", 0))},
    }


def _quantiles(x: np.ndarray) -> dict[str, list[float]]:
    return {"q01": np.quantile(x, 0.01, 0).tolist(), "q99": np.quantile(x, 0.99, 0).tolist(),
            "mean": x.mean(0).tolist(), "std": x.std(0).tolist(), "min": x.min(0).tolist(), "max": x.max(0).tolist()}


def extract(root: str | Path, out: str | Path, params: dict[str, Any], shard_size: int = 64) -> dict[str, Any]:
    """Extract every trajectory under `root` into `out/{train,val,test}/shard_<i>` (Arrow), `stats.json`
    and `manifest.json`. At most `shard_size` episodes are held in memory per split."""
    import datasets as hfd

    root, out = Path(root), Path(out)
    p = ExtractParams.from_dict(params)
    stats: Counter = Counter()
    drops: Counter = Counter()
    drop_log: list = []
    pending: dict[str, list] = {s: [] for s in SPLITS}
    n_shards = {s: 0 for s in SPLITS}
    kept = {s: 0 for s in SPLITS}
    train_a, train_s = [], []
    out.mkdir(parents=True, exist_ok=True)
    feats = features(p.image_size)

    def flush(split: str) -> None:
        recs = pending[split]
        (out / split).mkdir(parents=True, exist_ok=True)
        if not recs:  # an empty split is an empty folder (datasets cannot reload a 0-row save)
            return
        ds = hfd.Dataset.from_list(recs, features=feats)
        ds.save_to_disk(str(out / split / f"shard_{n_shards[split]:05d}"))
        n_shards[split] += 1
        pending[split] = []

    sessions_log: dict[str, Any] = {}
    for split, ep, task in iter_episodes(root, p, stats, drops, drop_log, sessions_log):
        pending[split].append(_record_for_arrow(ep, task))
        kept[split] += 1
        if split == "train":
            train_a.append(ep["action_rel"])
            train_s.append(ep["state"])
        if len(pending[split]) >= shard_size:
            flush(split)
    for split in SPLITS:
        flush(split)
    if train_a:
        A = np.concatenate(train_a).astype(np.float64)
        S = np.concatenate(train_s).astype(np.float64)
        stats_json = {"action_rel": _quantiles(A), "state": _quantiles(S), "mask": [True] * 6 + [False],
                      "n_train_steps": int(len(A))}
    else:
        stats_json = {"action_rel": None, "state": None, "mask": [True] * 6 + [False], "n_train_steps": 0}
    (out / "stats.json").write_text(json.dumps(stats_json, indent=1))
    summary = extract_summary(stats, drops, sessions_log, kept)
    log.info("extract summary: %s", json.dumps(summary))
    manifest = {"counts": dict(stats), "drop_reasons": dict(drops), "dropped": drop_log, "kept": kept,
                "summary": summary, "sessions": sessions_log, "params": params, "format": "HF datasets Arrow shards: <split>/shard_<i>/ (see README)"}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


# ------------------------------------------------------------------------------ loading
def load_split(out: str | Path, split: str) -> Any:
    """One split as a single `datasets.Dataset` (numpy format) over its Arrow shards."""
    import datasets as hfd

    d = Path(out) / split
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such split (not an extracted dataset?)")
    shards = sorted(d.glob("shard_*"))
    if not shards:
        size = json.loads((Path(out) / "manifest.json").read_text())["params"].get("image_size", 64)
        feats = features(size)
        return hfd.Dataset.from_dict({k: [] for k in feats}, features=feats).with_format("numpy")
    parts = [hfd.load_from_disk(str(s)) for s in shards]
    ds = parts[0] if len(parts) == 1 else hfd.concatenate_datasets(parts)
    return ds.with_format("numpy")


def normalize_actions(a: np.ndarray, stats: dict[str, Any], mode: str = "bounds_q99") -> np.ndarray:
    """BOUNDS_Q99 on dims 0-5 (gripper untouched, constant dims -> 0) or z-score."""
    st = stats["action_rel"]
    a = np.asarray(a, np.float64).copy()
    mask = np.array(stats["mask"])
    if mode == "bounds_q99":
        lo, hi = np.array(st["q01"]), np.array(st["q99"])
        n = np.clip(2 * (a - lo) / (hi - lo + 1e-8) - 1, -1, 1)
        n = np.where(np.array(st["min"]) == np.array(st["max"]), 0.0, n)
    elif mode == "zscore":
        n = (a - np.array(st["mean"])) / (np.array(st["std"]) + 1e-8)
    else:
        raise ValueError(mode)
    return np.where(mask, n, a)


class RLDSUnavailable(ImportError):
    pass


def read_rlds(builder_dir: str | Path, split: str = "train") -> Iterator[dict[str, Any]]:
    """Episodes of the RLDS `bridge_dataset` (optional; needs tensorflow-datasets).

    Maps `observation/image_k` -> slot k and `episode_metadata/has_image_k` -> has_view[k]; drops the
    zero action RLDS appends on the last step, so episodes have N frames and N-1 actions as here.
    """
    try:
        import tensorflow_datasets as tfds  # noqa: F401
    except ImportError as e:
        raise RLDSUnavailable("reading the RLDS bridge_dataset needs tensorflow-datasets "
                              "(pip install tensorflow-datasets tensorflow); the raw-tree extractor does not") from e
    builder = tfds.builder_from_directory(str(builder_dir))
    for ep in tfds.as_numpy(builder.as_dataset(split=split)):
        steps = list(ep["steps"])
        md = ep["episode_metadata"]
        has_view = np.array([bool(md.get(f"has_image_{k}", False)) for k in range(N_SLOTS)])
        imgs = np.stack([np.stack([s["observation"].get(f"image_{k}", np.zeros_like(s["observation"]["image_0"]))
                                   for k in range(N_SLOTS)]) for s in steps])
        yield {"images": imgs, "has_view": has_view,
               "state": np.stack([s["observation"]["state"] for s in steps]),
               "action_raw": np.stack([s["action"] for s in steps])[:-1],
               "instruction": steps[0]["language_instruction"].decode(),
               "source_rel_path": md["file_path"].decode()}
