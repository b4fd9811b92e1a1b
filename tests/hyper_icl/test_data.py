import json

import numpy as np
import pytest

from paperflow.hyper_icl.data import (N_LABELS, PRETRAIN_TASKS, coarse_of, derangement, load_split, load_world,
                                      target_label)
from paperflow.core.seeding import stream


def test_world_files_round_trip_with_schema(world):
    meta = load_world(world)
    assert meta["proj"].shape == (19, 32)
    pi = np.asarray(meta["pi_star"])
    assert sorted(pi) == list(range(6)) and not np.any(pi == np.arange(6))  # a derangement
    pre = load_split(world, "pretrain")
    assert pre["vis"].dtype == np.float32 and pre["vis"].shape == (64, 5, 32)
    assert pre["label"].shape == (64, 5) and pre["perm"].shape == (64, 9)
    q = load_split(world, "T2_test")
    assert q["vis"].shape == (20, 32) and q["demo_vis"].shape == (20, 3, 4, 32) and q["demo_label"].shape == (20, 3, 4)
    assert json.loads((world / "world.json").read_text())["counts"]["T1_train"] == 48


def test_labels_follow_the_tasks(world):
    meta = load_world(world)
    pre = load_split(world, "pretrain")
    for e in range(len(pre["task"])):
        name = PRETRAIN_TASKS[pre["task"][e]]
        base = {"colour": pre["colour"][e], "fine": pre["shape"][e], "coarse": coarse_of(pre["shape"][e]),
                "count": pre["count"][e] - 1}[name.removesuffix("_perm")]
        assert np.array_equal(pre["label"][e], pre["perm"][e][base])
    for t in ("T1", "T2"):
        q = load_split(world, f"{t}_test")
        want = target_label(t, q["colour"], q["shape"], q["count"], np.asarray(meta["pi_star"]),
                            np.asarray(meta["warm"]))
        assert np.array_equal(q["label"], want)
        dl = target_label(t, *(load_split(world, f"{t}_test")[k] for k in ("colour", "shape", "count")),
                          np.asarray(meta["pi_star"]), np.asarray(meta["warm"]))
        assert dl.max() < N_LABELS


def test_t2_is_conditional():
    colour, shape, count = np.array([0, 5]), np.array([7, 7]), np.array([3, 3])
    lab = target_label("T2", colour, shape, count, np.arange(6), np.array([0, 1, 2]))
    assert lab.tolist() == [7, 2]  # warm → fine shape, cold → count − 1


def test_visual_tokens_carry_the_attributes(world):
    """A least-squares read-out of colour from the visual tokens is near perfect (σ = 0.3 noise)."""
    pre = load_split(world, "pretrain")
    X, c = pre["vis"].reshape(-1, 32), pre["colour"].reshape(-1)
    W, *_ = np.linalg.lstsq(X, np.eye(6)[c], rcond=None)
    assert ((X @ W).argmax(1) == c).mean() > 0.9


def test_loader_rejects_bad_schema(tmp_path, world):
    d = dict(np.load(world / "T1_test.npz"))
    d["label"] = d["label"][:-1]
    np.savez(tmp_path / "bad.npz", **d)
    with pytest.raises(ValueError, match="label has shape"):
        load_split(tmp_path, "bad")


def test_derangement_has_no_fixed_point():
    for s in range(20):
        p = derangement(stream(s, "x"), 6)
        assert not np.any(p == np.arange(6))
