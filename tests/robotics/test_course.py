"""The obstacle course of the shared simulator (GAM's task, spec e.3): scenes, the recorded expert, the plant."""

import numpy as np
import pytest

from paperflow.robopolicy import gam
from paperflow.robotics import course
from paperflow.robotics.sim import HI, LO

TRAIN = {"yaw": (-0.4, 0.4), "scale": (0.8, 1.2), "start": ((0.12, -0.05), (0.20, 0.10)), "offset": (0.0, 0.2)}
POSE = {**TRAIN, "yaw": (1.0, 2.2), "scale": (1.5, 2.5), "start": ((0.10, -0.15), (0.45, 0.25))}


@pytest.mark.parametrize("cond", [TRAIN, POSE])
def test_scenes_fit_the_workspace_and_follow_the_condition(cond):
    rng = np.random.default_rng(0)
    for _ in range(30):
        sc = course.sample_scene(rng, 0, cond, 0.13)
        for x in (sc.p0, sc.goal, sc.obstacle):
            assert np.all(x[:2] > LO[:2]) and np.all(x[:2] < HI[:2])
        assert cond["scale"][0] * 0.13 <= sc.L <= cond["scale"][1] * 0.13
        assert cond["yaw"][0] <= sc.yaw <= cond["yaw"][1]
        assert np.isclose(np.linalg.norm(sc.goal - sc.p0), sc.L)
        assert np.isclose(sc.via[2] - sc.obstacle[2], (course.OBST_H + course.CLEAR) * sc.L)


def test_rpy_rotation_roundtrip():
    rng = np.random.default_rng(1)
    for _ in range(50):
        rpy = rng.uniform([-3, -1.4, -3], [3, 1.4, 3])
        assert np.allclose(course.R_to_rpy(course.rpy_to_R(rpy)), rpy, atol=1e-9)


def test_recorded_expert_succeeds_and_is_not_a_similarity_copy():
    rng = np.random.default_rng(2)
    ok = 0
    for _ in range(20):
        sc = course.sample_scene(rng, int(rng.integers(2)), TRAIN, 0.13)
        rec = course.record_demo(sc, rng)
        ok += gam.outcome(sc, rec["positions"])["success"]
        # data-collection mode: the reached motion is not the commanded one (gain kappa, noise)
        assert not np.allclose(np.diff(rec["state"][:, :3], axis=0), rec["action"][:, :3], atol=1e-4)
        assert rec["state"].shape == (len(rec["action"]) + 1, 7)
    assert ok >= 18
    # the same course at two scales: the expert's absolute step limit and corner radius make the canonical
    # world lines differ (a demo generated in GAM's canonical frame would give the same line at every scale)
    sc = course.sample_scene(np.random.default_rng(3), 0, TRAIN, 0.13)
    big = course.Scene(sc.task, sc.p0, sc.p0 + 2 * (sc.goal - sc.p0), sc.yaw, 2 * sc.L, sc.a, sc.d,
                       sc.p0 + 2 * (sc.obstacle - sc.p0) * np.array([1, 1, 0]), np.zeros(3))
    big.via = big.obstacle + np.array([0, 0, (course.OBST_H + course.CLEAR) * big.L])
    big.p0 = big.p0 * np.array([1, 1, 0]) + np.array([0, 0, course.CARRY * big.L])
    big.goal = big.goal * np.array([1, 1, 0]) + np.array([0, 0, course.CARRY * big.L])
    lines = []
    for s in (sc, big):
        P = course.reference_path(s)
        R = np.repeat(np.eye(3)[None], len(P), 0)
        pa, ra, _ = gam.arc_length_resample(P, R, 32, s.L)
        pc, Rc, L = gam.canonical_frame(s.p0, s.goal)
        lines.append(gam.world_line(pa, ra, pc, Rc, L)[:, :3])
    assert np.max(np.abs(lines[0] - lines[1])) > 0.01


def test_plant_is_the_simulators_blocking_step():
    sc = course.sample_scene(np.random.default_rng(4), 0, TRAIN, 0.13)
    pl = course.Plant(sc)
    p0, R0 = pl.pose
    assert np.allclose(p0, sc.p0) and np.allclose(R0, sc.Rc)
    p1, R1 = pl.step(np.array([0.01, 0.0, 0.0]), course.rot_z(sc.yaw + 0.5))
    assert np.allclose(p1, p0 + [0.01, 0, 0])
    assert np.isclose(course.R_to_rpy(R1)[2], sc.yaw + 0.1)  # rotation step clipped to 0.1 rad
    p2, _ = pl.step(np.array([0.0, 0.0, -1.0]), None)
    assert p2[2] == LO[2]  # clipped to the workspace like every Bridge action
    assert pl.world.task_id().startswith("carry:") and "over the obstacle" in pl.world.instruction()
