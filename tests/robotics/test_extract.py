import json
import pickle
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tests.robotics.conftest import make_tree

from paperflow.robotics import bridge
from paperflow.robotics.bridge import (DropTrajectory, ExtractParams, binarize_gripper, extract, extract_trajectory,
                                       find_sessions, find_trajectories, load_split, split_of, topics_to_slots)


def _episodes(out):
    eps = {}
    for s in ("train", "val", "test"):
        ds = load_split(out, s)
        for i in range(len(ds)):
            eps[str(ds[i]["source_rel_path"])] = ds[i]
    return eps


def _truth(raw: Path, rel: str) -> dict:
    return dict(np.load(raw.parent / "truth" / (rel + ".npz")))


def test_fixture_missing_view_truncated_jpeg_pre2021(tmp_path):
    """Acceptance: a real-format tree with a missing view, a truncated JPEG and a pre-2021 date."""
    legacy = make_tree(tmp_path / "legacy", legacy_fraction=1.0)
    modern = make_tree(tmp_path / "modern", legacy_fraction=0.0)
    sessions = find_sessions(legacy)
    assert sessions and all(s.name < "2021-07-23" for s in sessions)
    traj = find_trajectories(sessions[0])[0]
    shutil.rmtree(traj / "images2")  # a whole view missing
    jpg = traj / "images0" / "im_4.jpg"  # raw index 4 -> index 3 after the latency shift
    jpg.write_bytes(jpg.read_bytes()[: len(jpg.read_bytes()) // 3])  # truncated JPEG
    m_leg = extract(legacy, tmp_path / "mv_leg", {"image_size": 32})
    m_mod = extract(modern, tmp_path / "mv_mod", {"image_size": 32})
    assert m_leg["counts"]["latency_shifted"] == 4 and m_mod["counts"].get("latency_shifted", 0) == 0
    assert m_leg["counts"]["corrupt_jpegs"] == 1 and m_leg["counts"]["missing_view_folders"] == 1
    assert sum(m_leg["kept"].values()) == 4 and not m_leg["drop_reasons"]
    leg, mod = _episodes(tmp_path / "mv_leg"), _episodes(tmp_path / "mv_mod")
    rel = str(traj.relative_to(legacy))
    rel_mod = rel.replace(sessions[0].name, find_sessions(modern)[0].name)
    e, ref = leg[rel], mod[rel_mod]
    assert e["latency_shifted"] and not ref["latency_shifted"]
    assert list(e["has_view"]) == [True, True, False, False]
    fo = np.asarray(e["frame_ok"])
    assert not fo[0, 3] and fo[0, [0, 1, 2, 4]].all() and not fo[2].any() and not fo[3].any()
    imgs = np.asarray(e["images"], np.uint8)
    assert imgs[3, 0].max() == 0 and imgs[:, 2].max() == 0
    # after the shift, frames, states and actions line up with the undelayed recording exactly
    ref_imgs = np.asarray(ref["images"], np.uint8)
    assert imgs.shape == ref_imgs.shape
    keep = np.ones(len(imgs), bool)
    keep[3] = False
    np.testing.assert_array_equal(imgs[keep, 0], ref_imgs[keep, 0])
    np.testing.assert_array_equal(imgs[:, 1], ref_imgs[:, 1])
    for key in ("state", "action_rel", "action_raw"):
        np.testing.assert_array_equal(np.asarray(e[key]), np.asarray(ref[key]))
    # ... and with the simulator's truth: states and reached deltas exactly
    truth = _truth(legacy, rel)
    np.testing.assert_array_equal(np.asarray(e["state"]), truth["world_state"].astype(np.float32))
    np.testing.assert_array_equal(np.asarray(e["action_rel"])[:, :6], truth["reached"].astype(np.float32))
    np.testing.assert_array_equal(np.asarray(e["action_raw"]), truth["commanded"].astype(np.float32))
    assert len(e["state"]) == len(e["action_rel"]) + 1 == len(imgs)
    assert str(e["instruction"]) == str(truth["instruction"]) and e["has_language"]


def test_topic_remap_wrist_at_images1(tmp_path):
    raw = make_tree(tmp_path, folder_order=[0, 3, 1], render={"width": 48, "height": 36, "views": [0, 1, 3]})
    cfg = json.loads((find_sessions(raw)[0] / "config.json").read_text())
    assert cfg["agent"]["env"][1]["camera_topics"][1] == "/wrist/image_raw"
    extract(raw, tmp_path / "mv", {"image_size": 32})
    e = next(iter(_episodes(tmp_path / "mv").values()))
    assert list(e["has_view"]) == [True, True, False, True]
    assert list(e["orig_folder"]) == [0, 2, -1, 1]
    assert list(e["camera_topics"]) == ["/D435/color/image_raw", "/blue/image_raw", "", "/wrist/image_raw"]


def test_topics_to_slots_rules():
    assert topics_to_slots(["/cam0/image_raw", "/yellow/image_raw", "/cam2/image_raw"]) == {0: 0, 1: 1, 2: 2}
    assert topics_to_slots(["/D435/color/image_raw", "/wrist/image_raw", "/blue/image_raw"]) == {0: 0, 1: 3, 2: 1}
    with pytest.raises(DropTrajectory, match="fixed_camera_not_images0"):
        topics_to_slots(["/blue/image_raw", "/D435/color/image_raw"])
    with pytest.raises(DropTrajectory, match="unknown_camera_topic"):
        topics_to_slots(["/D435/color/image_raw", "/kinect/rgb"])
    # more than 4 views: the first 4 mapped views are kept
    m = topics_to_slots(["/cam0/image_raw", "/cam1/image_raw", "/cam2/image_raw", "/cam3/image_raw", "/wrist/image_raw"])
    assert sorted(m.values()) == [0, 1, 2, 3] and m[4] == 3 and 3 not in m


def test_drops_are_counted_with_reasons(tmp_path):
    raw = make_tree(tmp_path, n_sessions=3, episodes_per_session=2)
    trajs = [t for s in find_sessions(raw) for t in find_trajectories(s)]
    # 0: one view shorter (last frame missing) -> view_length_mismatch
    last = max(int(f.stem[3:]) for f in (trajs[0] / "images1").glob("im_*.jpg"))
    (trajs[0] / "images1" / f"im_{last}.jpg").unlink()
    # 1: one state too few -> count_mismatch
    with open(trajs[1] / "obs_dict.pkl", "rb") as f:
        obs = pickle.load(f)
    obs["full_state"], obs["time_stamp"] = obs["full_state"][:-1], obs["time_stamp"][:-1]
    with open(trajs[1] / "obs_dict.pkl", "wb") as f:
        pickle.dump(obs, f)
    # 2: missing policy_out -> missing_policy_out
    (trajs[2] / "policy_out.pkl").unlink()
    # 3: empty trajectory (no images at all)
    for d in trajs[3].glob("images*"):
        shutil.rmtree(d)
    # 4: a middle frame missing -> kept, frame masked
    (trajs[4] / "images0" / "im_2.jpg").unlink()
    # an lmdb copy is skipped entirely
    shutil.copytree(find_sessions(raw)[0], raw / "sim" / "lmdb_env" / "x" / "00" / find_sessions(raw)[0].name)
    man = extract(raw, tmp_path / "mv", {"image_size": 32})
    assert man["drop_reasons"] == {"view_length_mismatch": 1, "count_mismatch": 1, "missing_policy_out": 1, "empty": 1}
    assert sum(man["kept"].values()) == 2 and man["counts"]["missing_jpegs"] == 1
    assert man["counts"]["trajectories_seen"] == 6
    assert {d["reason"] for d in man["dropped"]} == set(man["drop_reasons"])


def test_missing_config_json_uses_default_topics_and_require_views(tmp_path):
    raw = make_tree(tmp_path, n_sessions=1, episodes_per_session=1)
    sess = find_sessions(raw)[0]
    (sess / "config.json").unlink()
    traj = find_trajectories(sess)[0]
    ep = extract_trajectory(traj, sess, raw, ExtractParams(image_size=16), Counter())
    assert list(ep["camera_topics"][:3]) == bridge.DEFAULT_TOPICS[:3]
    shutil.rmtree(traj / "images1")
    with pytest.raises(DropTrajectory, match="missing_required_view"):
        extract_trajectory(traj, sess, raw, ExtractParams(image_size=16), Counter())
    ep = extract_trajectory(traj, sess, raw, ExtractParams(image_size=16, keep_single_view=True), Counter())
    assert list(ep["has_view"]) == [True, False, True, False]


def test_binarize_edge_cases():
    g = np.array([1.0, 0.6, 0.2, 0.0, 0.0, 0.5, 1.0])
    b, mid = binarize_gripper(g)
    np.testing.assert_array_equal(b, [1, 0, 0, 0, 0, 1, 1])
    assert not mid
    b, mid = binarize_gripper(np.array([0.5, 0.4, 0.3]))  # all intermediate: raw last value carried
    np.testing.assert_allclose(b, [0.3, 0.3, 0.3])
    assert mid
    b, mid = binarize_gripper(np.array([1.0, 1.0, 0.6, 0.3]))  # ends mid-transition
    np.testing.assert_allclose(b, [1, 1, 0.3, 0.3])
    assert mid


def test_relabel_wraps_angles():
    state = np.zeros((3, 7))
    state[:, 5] = [3.1, -3.1, -3.0]
    a, n_wrapped, _ = bridge.relabel_actions(state, np.zeros((2, 7)))
    np.testing.assert_allclose(a[:, 5], [2 * np.pi - 6.2, 0.1], atol=1e-12)
    assert n_wrapped == 1


def test_splits_deterministic():
    names = [f"sim/env/task/00/2022-03-{d:02d}_09-00-00" for d in range(1, 29)]
    s1 = [split_of(n) for n in names]
    assert s1 == [split_of(n) for n in names]
    assert set(s1) <= {"train", "val", "test"} and s1.count("train") > len(s1) // 2


def test_rlds_reader_without_tfds(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import fails, as on the CPU profile
    with pytest.raises(bridge.RLDSUnavailable, match="tensorflow-datasets"):
        next(bridge.read_rlds("/nonexistent"))


def test_arrow_roundtrip_and_stats(tmp_path):
    raw = make_tree(tmp_path, n_sessions=4)
    extract(raw, tmp_path / "mv", {"image_size": 24})
    stats = json.loads((tmp_path / "mv" / "stats.json").read_text())
    assert stats["mask"] == [True] * 6 + [False] and len(stats["action_rel"]["q99"]) == 7
    ds = load_split(tmp_path / "mv", "train")
    e = ds[0]
    N = len(e["state"])
    assert np.asarray(e["images"]).shape == (N, 4, 24, 24, 3) and np.asarray(e["frame_ok"]).shape == (4, N)
    a = bridge.normalize_actions(np.asarray(e["action_rel"]), stats)
    assert np.all(np.abs(a[:, :6]) <= 1) and set(np.unique(a[:, 6])) <= {0.0, 1.0}


def test_session_one_folder_deeper_is_read_and_unexpected_depth_is_recorded(tmp_path, caplog):
    """Issue 16 item 1: a pre-2021 session in the deeper `bridge_data_v1/berkeley/<scene>/<task>/<n>/<date>`
    layout and one at depth 5 are both read; a session at a depth not configured is recorded in the
    manifest with a warning (never skipped silently); the summary counts read / masked / skipped."""
    raw = make_tree(tmp_path, n_sessions=3, episodes_per_session=1, legacy_fraction=1.0)
    s5, s6, s7 = find_sessions(raw)
    assert all(s.name < "2021-07-23" for s in (s5, s6, s7))
    deep = raw / "bridge_data_v1" / "berkeley" / "toykitchen1" / s6.parent.parent.name / "00" / s6.name
    deep.parent.mkdir(parents=True)
    s6.rename(deep)
    odd = raw / "a" / "b" / "c" / "d" / "e" / "f" / s7.name
    odd.parent.mkdir(parents=True)
    s7.rename(odd)
    assert find_sessions(raw) == [s5]  # the converters' depth 5 alone
    assert sorted(find_sessions(raw, 5, [6])) == sorted([s5, deep])
    caplog.set_level("WARNING")
    m = extract(raw, tmp_path / "mv", {"image_size": 32})  # defaults: depth 5, extra_depths [6]
    assert m["counts"]["trajectories_seen"] == 2 and sum(m["kept"].values()) == 2
    assert {str(deep.relative_to(raw)), str(s5.relative_to(raw))} == {
        str(Path(e).parent.parent.parent) for e in _episodes(tmp_path / "mv")}
    assert m["counts"]["latency_shifted"] == 2
    other = {o["path"]: o for o in m["sessions"]["other_depth"]}
    assert other[str(deep.relative_to(raw))] == {"path": str(deep.relative_to(raw)), "depth": 6, "read": True}
    assert other[str(odd.relative_to(raw))]["depth"] == 7 and not other[str(odd.relative_to(raw))]["read"]
    assert [sk["reason"] for sk in m["sessions"]["skipped"]] == ["session_at_unexpected_depth"]
    summ = m["summary"]
    assert summ["sessions"] == {"found": 3, "read": 2, "read_at_other_depth": 1,
                                "skipped": {"session_at_unexpected_depth": 1}}
    assert summ["trajectories"]["seen"] == 2 and summ["trajectories"]["kept"] == 2
    assert summ["frames"]["read"] > 0 and summ["frames"]["masked"] == sum(summ["frames"]["masked_why"].values())
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert str(odd.relative_to(raw)) in warned and "SKIPPED" in warned and str(deep.relative_to(raw)) in warned
    # with depth 7 added the third session is read as well; with only depth 5 the deeper two are recorded
    m7 = extract(raw, tmp_path / "mv7", {"image_size": 32, "extra_depths": [6, 7]})
    assert sum(m7["kept"].values()) == 3 and not m7["sessions"]["skipped"]
    m5 = extract(raw, tmp_path / "mv5", {"image_size": 32, "extra_depths": []})
    assert sum(m5["kept"].values()) == 1 and m5["summary"]["sessions"]["skipped"] == {"session_at_unexpected_depth": 2}


def test_lmdb_and_masked_frames_are_counted(tmp_path):
    raw = make_tree(tmp_path, n_sessions=2, episodes_per_session=1)
    s0, s1 = find_sessions(raw)
    lm = s1.parent.parent / "lmdb_cache"
    lm.mkdir()
    s1.rename(lm / s1.name)
    traj = find_trajectories(s0)[0]
    (traj / "images1" / "im_2.jpg").unlink()  # one frame missing -> masked, not dropped
    m = extract(raw, tmp_path / "mv", {"image_size": 32})
    assert m["summary"]["sessions"]["skipped"] == {"lmdb_path": 1} and sum(m["kept"].values()) == 1
    assert m["summary"]["frames"]["masked_why"]["missing_jpegs"] == 1
    assert m["summary"]["frames"]["masked"] >= 1
