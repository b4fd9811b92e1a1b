"""grpo_lite arms: majority vote by construction, metrics, determinism, learning."""

from __future__ import annotations

import numpy as np
import torch

from paperflow.video_bci.train import majority_vote, metrics, run_arms, train_arm, updates_to_frac

from .conftest import arm_params


def test_majority_vote_has_zero_minority_recovery(splits):
    d = splits["test"]
    a, tr = majority_vote(d)
    m = metrics(a, tr, d)
    assert m["minority_recovery"] == 0.0 and m["majority_retention"] == 1.0
    assert m["n"]["minority"] + m["n"]["absent"] + m["n"]["majority_right"] == m["n"]["all"]
    assert 0.0 < m["acc"] < 1.0 and (m["absent_recovery"] == 0.0 or m["n"]["absent"] == 0)


def test_metrics_subsets_and_iou(splits):
    d = splits["test"]
    y = d["y"].astype(int)
    m = metrics(y, d["decisive"], d)  # the oracle
    assert m["acc"] == m["minority_recovery"] == m["majority_retention"] == 1.0 and m["trace_iou"] == 1.0
    wrong = (y + 1) % 5
    assert metrics(wrong, np.zeros_like(d["decisive"]), d)["acc"] == 0.0


def test_updates_to_frac():
    assert updates_to_frac([(10, 0.2), (20, 0.7), (30, 0.75), (40, 0.8)]) == 30  # 0.9 × 0.8 = 0.72
    assert updates_to_frac([(10, 0.9)]) == 10


def test_training_is_deterministic_and_changes_weights(splits):
    p = arm_params()
    n1, c1, _ = train_arm("dus_pts", splits["train"], splits["val"], p, seed=3)
    n2, c2, _ = train_arm("dus_pts", splits["train"], splits["val"], p, seed=3)
    assert c1 == c2 and [s for s, _ in c1] == [2, 4]
    assert all(torch.equal(a, b) for a, b in zip(n1.state_dict().values(), n2.state_dict().values()))
    torch.manual_seed(3)
    from paperflow.video_bci.model import Integrator

    init = Integrator(8, p)
    assert any(not torch.equal(a, b) for a, b in zip(init.state_dict().values(), n1.state_dict().values()))


def test_grpo_lite_learns_to_integrate(splits):
    p = arm_params(d_model=32, heads=4, layers=1, items_per_update=32, updates=120, eval_every=60, lr=0.002)
    res = run_arms(["racc"], p, splits, seed=0)["racc"]
    assert res["acc"] > 0.45  # chance is 0.2; the majority answer is right on ~70% of items
    assert res["curve"][-1][0] == 120 and len(res["correct"]) == len(splits["test"]["y"])


def test_interrupted_training_resumes_to_identical_weights(splits, tmp_path):
    p = arm_params(updates=6, ckpt_every=0)
    full, c_full, _ = train_arm("dus_pts", splits["train"], splits["val"], p, seed=1)
    ck = tmp_path / "ck"
    train_arm("dus_pts", splits["train"], splits["val"], p, seed=1, ckpt=ck, stop_after=3)  # "killed" after 3
    resumed, c_res, _ = train_arm("dus_pts", splits["train"], splits["val"], p, seed=1, ckpt=ck)
    assert c_res == c_full
    assert all(torch.equal(a, b) for a, b in zip(full.state_dict().values(), resumed.state_dict().values()))
    p_res = arm_params(updates=6, ckpt_every=0, arms=["resampled"])
    a, _, _ = train_arm("resampled", splits["train"], splits["val"], p_res, seed=1)
    train_arm("resampled", splits["train"], splits["val"], p_res, seed=1, ckpt=tmp_path / "r", stop_after=2)
    b, _, _ = train_arm("resampled", splits["train"], splits["val"], p_res, seed=1, ckpt=tmp_path / "r")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_finished_arms_are_kept_for_a_rerun(splits, tmp_path):
    p = arm_params(updates=2, eval_every=1)
    first = run_arms(["racc"], p, splits, seed=0, ckpt=tmp_path)
    assert (tmp_path / "racc.json").exists()
    again = run_arms(["racc"], p, splits, seed=0, ckpt=tmp_path)
    assert again["racc"]["correct"] == first["racc"]["correct"] and again["racc"]["acc"] == first["racc"]["acc"]
    (tmp_path / "racc.json").write_text('{"acc": -1}')  # a kept result is read back, not retrained ...
    assert run_arms(["racc"], p, splits, seed=0, ckpt=tmp_path)["racc"]["acc"] == -1
    other = run_arms(["racc"], {**p, "lr": 0.01}, splits, seed=0, ckpt=tmp_path)  # ... unless the parameters changed
    assert other["racc"]["acc"] >= 0
