"""The slot world: confusable prototypes, easy vs full scenes, MCQs, the on-disk schema."""

from __future__ import annotations

import numpy as np

from paperflow.staged_rl.data import (CAPTION, COLOURS, IMAGE, NONE, SPLITS, TASKS, counts, load_split, load_world,
                                      mcq_options, prototypes, scenes)
from paperflow.core.seeding import stream

from .conftest import small_data


def test_red_orange_are_the_confusable_pair():
    p = prototypes(0, 8, 2.0, 0.8)
    dist = np.linalg.norm(p[:4, None] - p[None, :4], axis=-1)
    assert abs(dist[0, 1] - 0.8) < 1e-5
    others = [dist[i, j] for i in range(4) for j in range(4) if i < j and (i, j) != (0, 1)]
    assert min(others) > 0.8 and np.all(p[4] == 0)


def test_easy_scenes_never_mix_red_and_orange():
    easy = scenes(500, 6, stream(0, "t"), True, 3)
    n_obj = (easy >= 0).sum(1)
    assert n_obj.min() >= 1 and n_obj.max() <= 3
    assert not np.any(((easy == 0).any(1)) & ((easy == 1).any(1)))
    full = scenes(500, 6, stream(1, "t"), False, 3)
    assert (full >= 0).sum(1).max() == 6 and np.any(((full == 0).any(1)) & ((full == 1).any(1)))


def test_mcq_options_distinct_and_hold_the_answer():
    rng = stream(0, "mcq")
    for n in range(7):
        o = mcq_options(n, rng, 6)
        assert len(set(o.tolist())) == 4 and n in o and o.min() >= 0 and o.max() <= 6


def test_schema_of_every_split(world):
    meta = load_world(world)
    assert meta["protos"].shape == (5, 8) and meta["colours"] == list(COLOURS)
    p = small_data()
    for name in SPLITS:
        d = load_split(world, name)
        n = len(d["task"])
        assert d["colours"].shape == (n, 6) and d["colours"].dtype == np.int8
        assert d["feats"].shape == (n, 6, 8) and d["feats"].dtype == np.float32
        assert d["q"].shape == (n, 2) and d["options"].shape == (n, 4) and d["see"].shape == (n, 4)
    vis = load_split(world, "vis_rl")
    cnt = counts(vis["colours"])
    i = np.arange(len(vis["task"]))
    assert np.array_equal(vis["see"][:, 0], cnt[i, vis["q"][:, 0]])
    assert np.array_equal(vis["answer"], vis["see"][:, 0] + vis["see"][:, 1])
    perc = load_split(world, "perc_pool")
    assert all(a in o for a, o in zip(perc["answer"], perc["options"]))
    w = load_split(world, "warmup")
    text = w["task"] == TASKS.index("text")
    assert text.any() and w["answer"][text].max() <= p["warm_max_sum"] and np.all(w["prefix"][text] == NONE)
    assert {IMAGE, CAPTION} <= set(w["prefix"].tolist())
    img = (w["prefix"] == IMAGE) & ~text  # image rows of the warm-up are easy scenes
    assert (w["colours"][img] >= 0).sum(1).max() <= p["easy_max_objects"]
    # the image is prototype + noise: nearest prototype recovers most slots
    t = load_split(world, "test_vis")
    d2 = ((t["feats"][..., None, :] - meta["protos"][None, None]) ** 2).sum(-1)
    nearest = np.where(d2.argmin(-1) == 4, -1, d2.argmin(-1))
    assert 0.7 < (nearest == t["colours"]).mean() < 1.0
