"""rl.backend trl: the same items and rewards through TRL's GRPOTrainer on a tiny Llama (2 steps)."""

from __future__ import annotations

import json

import numpy as np

from paperflow.video_bci.data import prior_stats
from paperflow.video_bci.rewards import utility
from paperflow.video_bci.trl_backend import parse, render, reward_fn, rows, run_arms_trl, vocab

from .conftest import arm_params


def test_render_parse_and_rewards_match_grpo_lite(splits):
    d = splits["val"]
    p = arm_params()
    text = render(d, 0, True)
    assert text.endswith("ans") and text.count(" h ") == 8 and set(text.split()) <= set(vocab(8))
    assert "h" not in render(d, 0, False).split()
    assert parse("a3 t0 t2 t9 x", 8)[0] == 3 and parse("a3 t0 t2", 8)[1].tolist() == [1, 0, 1, 0, 0, 0, 0, 0]
    a, _, ok = parse("t1 a3", 8)
    assert a == -1 and not ok
    idx = np.arange(6)
    cols = rows(d, idx, True)
    st = prior_stats(d)
    ans = np.array([int(d["y"][i]) if i % 2 else int(d["majority"][i]) for i in idx])
    tr = d["prior_trace"][idx, 0]
    comps = [f"a{a} " + " ".join(f"t{t}" for t in np.flatnonzero(r)) for a, r in zip(ans, tr)]
    for arm in ("racc", "dus", "pts", "dus_pts", "entropy_weighted"):
        got = reward_fn(arm, p, 8)(comps, **{k: v for k, v in cols.items() if k != "prompt"})
        item = {"y": d["y"][idx].astype(int), "p_hat": st["p_hat"][idx], "H_hat": st["H_hat"][idx],
                "majority": st["majority"][idx], "prior_ans": d["prior_ans"][idx].astype(int),
                "prior_trace": d["prior_trace"][idx]}
        want = utility(arm, ans[:, None], tr[:, None, :], item, p)[:, 0] + p["w_fmt"]
        assert np.allclose(got, want), arm
    bad = reward_fn("racc", p, 8)(["t1 t2"], **{k: v[:1] for k, v in cols.items() if k != "prompt"})
    assert bad == [0.0]


def test_trl_backend_two_steps_on_tiny_llama(splits, tmp_path):
    small = {s: {k: v[:16] for k, v in d.items()} for s, d in splits.items()}
    p = arm_params(group_size=4, trl_prompts_per_step=2, trl_max_completion_length=5, trl_lr=1e-3)
    res = run_arms_trl(["majority", "dus_pts"], p, small, seed=0, workdir=tmp_path, steps=2)
    r = res["dus_pts"]
    assert len(r["trl_log"]) == 2 and all("reward" in h for h in r["trl_log"])
    assert len(r["correct"]) == 16 and 0.0 <= r["format_rate"] <= 1.0 and r["update_seconds"] > 0
    assert res["majority"]["minority_recovery"] in (0.0,) or np.isnan(res["majority"]["minority_recovery"])


def test_trl_arms_resume_after_a_kill(splits, tmp_path):
    """Arm racc finishes, arm dus_pts is killed after 3 of 4 steps (checkpoint at 2); the rerun keeps racc's
    result, resumes dus_pts from its checkpoint and reports what one uninterrupted run reports."""
    small = {s: {k: v[:16] for k, v in d.items()} for s, d in splits.items()}
    p = arm_params(group_size=4, trl_prompts_per_step=2, trl_max_completion_length=5, trl_lr=1e-2, trl_save_steps=2)
    arms = ["racc", "dus_pts"]

    def strip(res):
        return {a: {k: v for k, v in r.items() if k not in ("train_seconds", "update_seconds", "trl_log")}
                | {"log": [(h["step"], h["reward"], h["loss"]) for h in r["trl_log"]]} for a, r in res.items()}

    full = run_arms_trl(arms, p, small, seed=0, workdir=tmp_path / "a", steps=4, resumable=True)
    killed = tmp_path / "b"
    first = run_arms_trl(arms[:1], p, small, seed=0, workdir=killed, steps=4, resumable=True)
    assert run_arms_trl(arms[1:], p, small, seed=0, workdir=killed, steps=4, resumable=True, stop_after=3) is None
    assert (killed / "racc.json").exists() and (killed / "dus_pts" / "checkpoint-2").is_dir()
    resumed = run_arms_trl(arms, p, small, seed=0, workdir=killed, steps=4, resumable=True)
    def same(a, b) -> bool:  # NaN-safe equality
        return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)

    assert same(resumed["racc"], first["racc"])  # kept, not retrained
    assert same(strip(resumed), strip(full))
    assert not (killed / "dus_pts").exists()  # a finished arm's training state is removed


def test_frames_reach_a_tiny_vlm_as_images(splits, tmp_path):
    from paperflow.video_bci.trl_backend import frame_image, vlm_rows

    d = splits["test"]
    img = frame_image(d["frames"][0, 0])
    assert img.shape == (16, 16, 3) and img.dtype.name == "uint8"
    centre = img[2::4, 2::4, 0].reshape(-1).astype(float)
    inside = (centre > 0) & (centre < 255)
    assert np.abs((centre - 128) / 100 - d["frames"][0, 0])[inside].max() <= 0.5 / 100 + 1e-6
    r = vlm_rows(d, np.arange(3), True, tmp_path / "t.parquet")
    T = d["frames"].shape[1]
    assert [len(x) for x in r["images"]] == [T] * 3 and r["y"] == [int(v) for v in d["y"][:3]]
    assert sum(part["type"] == "image" for part in r["prompt"][0][0]["content"]) == T
    small = {s: {k: v[:8] for k, v in x.items()} for s, x in splits.items()}
    p = arm_params(group_size=2, trl_prompts_per_step=2, trl_max_completion_length=4, trl_lr=1e-3, trl_vlm=True,
                   trl_hidden=16, trl_layers=1)
    res = run_arms_trl(["dus_pts"], p, small, seed=0, workdir=tmp_path / "w", steps=2)
    r = res["dus_pts"]
    assert len(r["trl_log"]) == 2 and all("reward" in h for h in r["trl_log"]) and len(r["correct"]) == 8


def test_prior_stats_leave_unparsed_priors_out_and_fixed_priors_unchanged(splits):
    d = splits["val"]
    fixed = prior_stats(d)
    ref = np.eye(5)[d["prior_ans"].astype(int)].mean(axis=1)  # the formula before unparsed priors existed
    assert np.array_equal(fixed["p_hat"], ref)
    e = {**d, "prior_ans": d["prior_ans"].copy()}
    e["prior_ans"][0, :4] = -1  # half of item 0's priors unparsed
    e["prior_ans"][1, :] = -1  # none of item 1's
    st = prior_stats(e)
    want = np.bincount(d["prior_ans"][0, 4:].astype(int), minlength=5) / 4
    assert np.allclose(st["p_hat"][0], want) and st["p_hat"][1].sum() == 0 and st["H_hat"][1] == 0
    assert "a-1" not in render(e, 1, True) and render(e, 1, True).count(" h ") == 8


def test_self_priors_are_sampled_from_the_policy_and_reach_the_arms(splits, tmp_path):
    from paperflow.video_bci.trl_backend import load_policy, self_priors

    small = {s: {k: v[:6] for k, v in d.items()} for s, d in splits.items()}
    p = arm_params(group_size=2, trl_prompts_per_step=2, trl_max_completion_length=4, trl_lr=1e-3,
                   prior_source="self", self_prior_temperature=1.0)
    model, tok = load_policy(p, 8, 0)
    d, st = self_priors(model, tok, small["test"], p, 0, tmp_path, "test")
    d2, _ = self_priors(model, tok, small["test"], p, 0, tmp_path, "test")
    assert np.array_equal(d["prior_ans"], d2["prior_ans"]) and np.array_equal(d["prior_trace"], d2["prior_trace"])
    N = small["test"]["prior_ans"].shape[1]
    assert d["prior_ans"].shape == (6, N) and d["prior_trace"].shape == (6, N, 8)
    assert ((d["prior_ans"] >= -1) & (d["prior_ans"] < 5)).all() and 0 <= st["unparsed"] <= 1
    assert not np.array_equal(d["prior_ans"], small["test"]["prior_ans"])  # not the fixed generator's
    for i in range(6):
        valid = d["prior_ans"][i][d["prior_ans"][i] >= 0]
        if valid.size:
            assert np.bincount(valid, minlength=5)[d["majority"][i]] == np.bincount(valid, minlength=5).max()
        else:
            assert d["majority"][i] == -1
        assert d["absent"][i] == int(not (d["prior_ans"][i] == d["y"][i]).any())
    res = run_arms_trl(["majority", "dus_pts"], p, small, seed=0, workdir=tmp_path / "w", steps=2)
    assert set(res["dus_pts"]["self_priors"]) >= {"train_unparsed", "test_prior_acc"}
    assert len(res["dus_pts"]["trl_log"]) == 2


def test_self_priors_on_the_tiny_vlm(splits, tmp_path):
    from paperflow.video_bci.trl_backend import load_vlm_policy, self_priors

    small = {k: v[:3] for k, v in splits["test"].items()}
    p = arm_params(trl_max_completion_length=3, trl_vlm=True, trl_hidden=16, trl_layers=1, prior_source="self",
                   self_prior_temperature=1.0)
    model, proc = load_vlm_policy(p, 8, 0)
    d, st = self_priors(model, proc, small, p, 0, tmp_path, "test")
    assert d["prior_ans"].shape == small["prior_ans"].shape and 0 <= st["unparsed"] <= 1
