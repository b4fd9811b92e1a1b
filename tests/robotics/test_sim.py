import numpy as np
import pytest

from paperflow.robotics.sim import (LO, HI, Distractors, ExpertPolicy, Renderer, SimConfig, TabletopSim, World,
                                    evaluate, make_camera)
from paperflow.core.seeding import stream


def test_reset_step_success_api():
    cfg = SimConfig(width=48, height=36, views=(0, 1, 2, 3), max_steps=5)
    env = TabletopSim(cfg, seed=1)
    obs = env.reset(task_id="lift:red:cube")
    assert set(obs["images"]) == {0, 1, 2, 3}
    assert all(im.shape == (36, 48, 3) and im.dtype == np.uint8 for im in obs["images"].values())
    assert obs["state"].shape == (7,) and obs["instruction"] == "lift the red cube"
    s0 = obs["state"].copy()
    a = np.array([0.01, -0.01, 0.005, 0.0, 0.0, 0.05, 1.0])
    obs, info = env.step(a)  # blocking mode: the target is reached exactly
    np.testing.assert_allclose(obs["state"][:6], np.concatenate([np.clip(s0[:3] + a[:3], LO, HI), s0[3:6] + a[3:6]]))
    assert set(info) == {"success", "done", "t"} and info["t"] == 1 and not info["success"]
    for _ in range(4):
        obs, info = env.step(np.zeros(7) + np.array([0, 0, 0, 0, 0, 0, 1.0]))
    assert info["done"] and info["t"] == 5


def test_scripted_expert_succeeds_closed_loop():
    cfg = SimConfig(width=32, height=24, views=(0, 1))
    res = evaluate(ExpertPolicy(), cfg, n_episodes_per_task=2, max_steps=40, seeds=[0])
    assert res["success_rate"] >= 0.8 and len(res["per_task"]) == 3


def test_nonblocking_dynamics_commanded_differs_from_reached():
    cfg = SimConfig(blocking=False)
    w = World(cfg, stream(0, "w"))
    p0 = w.p.copy()
    w.step(np.array([0.02, 0, 0, 0, 0, 0, 0.0]), blocking=False)
    assert 0.7 * 0.02 - 0.005 < w.p[0] - p0[0] < 0.02 + 0.005 and abs(w.p[0] - p0[0] - 0.02) > 1e-6
    assert w.w == pytest.approx(0.5)  # the gripper moves at most 0.5 per step


def test_perspective_projection_consistent_with_rays():
    cfg = SimConfig(width=64, height=48)
    cam = make_camera(1, cfg, stream(0, "c"))
    X = np.array([0.3, 0.05, 0.02])
    uv, z = cam.project(X)
    assert 0 <= uv[0] < 64 and 0 <= uv[1] < 48 and z > 0
    d = cam.rays()[int(uv[1]), int(uv[0])]
    ray = (X - cam.eye) / np.linalg.norm(X - cam.eye)
    assert np.dot(d / np.linalg.norm(d), ray) > 0.999  # within a pixel's angle


def _change_shares(strength: float, slot: int) -> float:
    """Share of frame-to-frame pixel change in `slot` that its distractor causes (truth: re-render off)."""
    cfg = SimConfig(width=64, height=48, views=(0, 1, 2), distractor_strength=strength, noise_sigma=0.0)
    env = TabletopSim(cfg, seed=2)
    env.reset(task_id="push:red:cube:left")
    prev_on, prev_off = env.render(noise=False)[slot], env.render(distractors=False, noise=False)[slot]
    total, caused = 0.0, 0.0
    for _ in range(8):
        env.step(np.array([0.01, 0.01, 0, 0, 0, 0, 1.0]))
        on, off = env.render(noise=False)[slot], env.render(distractors=False, noise=False)[slot]
        d_on = np.abs(on.astype(float) - prev_on).sum()
        d_off = np.abs(off.astype(float) - prev_off).sum()
        total += d_on
        caused += max(d_on - d_off, 0.0)
        prev_on, prev_off = on, off
    return caused / max(total, 1e-9)


@pytest.mark.parametrize("slot", [0, 1, 2])
def test_distractors_off_and_on(slot):
    # s = 0: every change is explained by the EEF/object motion (rendering with distractors off is identical)
    assert _change_shares(0.0, slot) == 0.0
    # s = 1: a large share of the distracted view's change comes from its own distractor
    assert _change_shares(1.0, slot) > 0.3


def test_distractors_independent_of_actions():
    cfg = SimConfig(width=32, height=24)
    d1 = Distractors(cfg.distractors, 1.0, 10, stream(5, "d"), 32, 24)
    d2 = Distractors(cfg.distractors, 1.0, 10, stream(5, "d"), 32, 24)
    for k in d1.params:
        np.testing.assert_array_equal(d1.params[k], d2.params[k])
    # different views draw different processes
    assert not np.allclose(d1.params["0/gain"][:, 0], d1.params["0/gain"][0, 0])


def test_render_knobs_arm_scale_eef_colour_zoom():
    """render.arm_scale / eef_rgb / zoom change the picture; the defaults draw exactly what they did."""
    base = SimConfig(width=48, height=36, views=(0,), distractor_strength=0.0, noise_sigma=0.0, cam_jitter=False)
    imgs = {}
    for name, over in {"base": {}, "big": {"arm_scale": 1.5}, "white": {"eef_rgb": (250, 250, 250)},
                       "zoom": {"zoom": 1.3}}.items():
        env = TabletopSim(SimConfig(**{**base.__dict__, **over}), seed=2)
        imgs[name] = env.reset(task_id="lift:red:cube", episode_seed=5)["images"][0].astype(int)
    for name in ("big", "white", "zoom"):
        assert np.abs(imgs[name] - imgs["base"]).sum() > 0, name
    # a white wrist is brighter than the default dark grey one somewhere in the image
    assert imgs["white"].max() >= 240 and (imgs["white"] - imgs["base"]).max() > 100
    assert SimConfig.from_dict({"eef_rgb": [250, 250, 250]}).eef_rgb == (250.0, 250.0, 250.0)


def test_world_knobs_n_objects_and_grasp_tolerance():
    """sim n_objects / grasp_xy / grasp_z: defaults keep the old scenes (2-4 objects, 2.5 cm / 2 cm grasp);
    a wider tolerance grasps where the default does not."""
    cfg = SimConfig(width=32, height=24, views=(0,))
    counts = {len(World(cfg, stream(0, "w", i)).objs) for i in range(40)}
    assert counts == {2, 3, 4}
    one = SimConfig.from_dict({"n_objects": [1, 1]})
    assert one.n_objects == (1, 1) and {len(World(one, stream(0, "w", i)).objs) for i in range(10)} == {1}
    grasped = {}
    for name, c in {"default": cfg, "wide": SimConfig(**{**cfg.__dict__, "grasp_xy": 0.05})}.items():
        w = World(c, stream(1, "w", 0), task_id="lift:red:cube")
        o = w.objs[0]
        w.p = np.array([o.pos[0] + 0.035, o.pos[1], o.pos[2] + o.size / 2])  # 3.5 cm beside the centre, at the top
        w.step(np.array([0, 0, 0, 0, 0, 0, 0.0]), blocking=True)
        grasped[name] = o.held
    assert grasped == {"default": False, "wide": True}


def test_world_knob_obj_region():
    """sim obj_region: the default (None) draws exactly the old scenes; a box keeps every object inside it;
    a box too small for the requested objects fails loudly instead of looping."""
    base = SimConfig(width=32, height=24, views=(0,))
    same = SimConfig.from_dict({"obj_region": [[0.14, -0.10], [0.40, 0.20]]})
    for i in range(10):
        a, b = World(base, stream(0, "w", i)), World(same, stream(0, "w", i))
        assert [o.pos.tolist() for o in a.objs] == [o.pos.tolist() for o in b.objs]
    box = SimConfig.from_dict({"n_objects": [1, 1], "obj_region": [[0.245, 0.025], [0.295, 0.075]]})
    assert box.obj_region == ((0.245, 0.025), (0.295, 0.075))
    for i in range(30):
        o = World(box, stream(0, "w", i)).objs[0]
        assert 0.245 <= o.pos[0] <= 0.295 and 0.025 <= o.pos[1] <= 0.075
    tight = SimConfig.from_dict({"n_objects": [3, 3], "obj_region": [[0.25, 0.03], [0.27, 0.05]]})
    with pytest.raises(ValueError, match="cannot place"):
        World(tight, stream(0, "w", 0))


def test_evaluate_runs_batch_policies_in_lockstep_with_the_same_episodes():
    """A policy with reset_batch/act_batch is evaluated with one env per episode in lockstep; the scenes,
    successes and step counts equal the episode-by-episode loop's (a deterministic toward-the-object policy)."""
    from paperflow.robotics.sim import evaluate, task_list

    class Toward:
        def reset(self, instruction):
            pass

        def act(self, obs):
            s = obs["state"]
            a = np.zeros(7)
            a[:3] = np.clip(np.array([0.27, 0.05, 0.02]) - s[:3], -0.02, 0.02)
            a[6] = 0.0 if s[2] < 0.03 else 1.0
            return a

    class TowardBatch(Toward):
        def reset_batch(self, instructions):
            self.n = len(instructions)

        def act_batch(self, obs, idx):
            assert len(obs) == len(idx) and max(idx) < self.n
            return [self.act(o) for o in obs]

    cfg = SimConfig.from_dict({"width": 32, "height": 24, "views": [0], "templates": ["lift", "push"]})
    tasks = task_list(cfg, 3, 10**6 + 1)
    a = evaluate(Toward(), cfg, 3, 12, [0, 1], tasks=tasks)
    b = evaluate(TowardBatch(), cfg, 3, 12, [0, 1], tasks=tasks)
    assert a == b and 0 < a["mean_steps"] <= 12


def test_policies_without_images_get_no_render_and_the_same_outcomes():
    """`uses_images = False` (expert, random): observations carry no images, and the outcomes equal those of
    the same policy with images (rendering draws only from its own pixel-noise stream)."""
    from paperflow.robotics.sim import task_list

    class Rand:
        uses_images = False

        def __init__(self):
            self.rng = np.random.default_rng(0)
            self.seen = set()

        def reset(self, instruction):
            pass

        def act(self, obs):
            self.seen.add(len(obs["images"]))
            a = self.rng.uniform(-0.02, 0.02, 7)
            a[6] = float(self.rng.random() < 0.5)
            return a

    class RandWithImages(Rand):
        uses_images = True

    class ExpertWithImages(ExpertPolicy):
        uses_images = True

    cfg = SimConfig.from_dict({"width": 32, "height": 24, "views": [0, 1], "templates": ["lift", "push"]})
    tasks = task_list(cfg, 2, 10**6 + 1)
    blind, seeing = Rand(), RandWithImages()
    assert evaluate(blind, cfg, 2, 10, [0, 1], tasks=tasks) == evaluate(seeing, cfg, 2, 10, [0, 1], tasks=tasks)
    assert blind.seen == {0} and seeing.seen == {2}
    e_blind = evaluate(ExpertPolicy(seed=3), cfg, 2, 30, [0], tasks=tasks)
    assert e_blind == evaluate(ExpertWithImages(seed=3), cfg, 2, 30, [0], tasks=tasks)
    assert e_blind["success_rate"] > 0
