"""Warm-up (resumable), the filter rule, the budget split, an RL stage and caption-SFT, resumable RL arms."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from paperflow.core.seeding import stream
from paperflow.staged_rl.data import load_split, load_world
from paperflow.staged_rl.train import (ARMS, caption_sft, evaluate, filter_keep, load_sets, load_tests, rl_stage,
                                       run_arm, run_arms, stage_updates, warmup)

from .conftest import small_params


def test_filter_rule():
    img = [1, None, 2, 3, 0]
    cap = [2, 2, 2, 1, 0]
    gold = [2, 2, 2, 3, 0]
    # kept: image parseable and wrong, caption right — only item 0
    assert filter_keep(img, cap, gold) == [0]


def test_budget_split_is_equal_across_rl_arms():
    split = [30, 120, 150]
    for arm in ARMS:
        if arm == "base":
            assert stage_updates(arm, split) == []
            continue
        assert sum(u for _, u in stage_updates(arm, split)) == 300, arm
    assert [k for k, _ in stage_updates("t_p_v", split)] == ["text", "perc", "vis"]
    assert stage_updates("v_t_p", split) == [("vis", 150), ("text", 120), ("perc", 30)]


def test_warmup_resumes_to_identical_weights(world, tmp_path):
    p = small_params()
    d = load_split(world, "warmup")
    protos = load_world(world)["protos"]
    full, _ = warmup(p, d, protos, 0, tmp_path / "a")
    stopped, _ = warmup(p, d, protos, 0, tmp_path / "b", stop_after=3)
    assert stopped is None
    resumed, _ = warmup(p, d, protos, 0, tmp_path / "b")
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), k


def test_rl_stage_and_caption_sft_update_the_policy(world, tmp_path):
    p = small_params()
    protos = load_world(world)["protos"]
    net, _ = warmup(p, load_split(world, "warmup"), protos, 0, tmp_path / "w")
    before = [x.clone() for x in net.parameters()]
    filt = {"keep": list(range(5))}
    sets = load_sets(world, filt, p, 0)
    assert len(sets["perc"]) == 5 and len(sets["perc_unf"]) == 5
    hist = rl_stage(net, [(sets["text"], 1.0), (sets["vis"], 1.0)], 3, p, protos, stream(0, "t"),
                    torch.Generator().manual_seed(0))
    assert len(hist) == 2 and all(0 <= h["acc"] <= 1 for h in hist)
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))
    sft = caption_sft(net, load_split(world, "describe"), 20, {**p, "sft_lr": 3e-3}, protos, stream(0, "s"))
    assert np.mean([h["loss"] for h in sft[-5:]]) < np.mean([h["loss"] for h in sft[:5]])


def test_run_arm_evaluates_after_every_stage(world, tmp_path):
    p = small_params()
    protos = load_world(world)["protos"]
    net, _ = warmup(p, load_split(world, "warmup"), protos, 0, tmp_path / "w")
    sets = load_sets(world, {"keep": []}, p, 0)  # the filter kept nothing: the P stage is skipped, recorded
    tests = load_tests(world, p)
    r = run_arm("p_t_v", net, sets, tests, protos, p, 0)
    assert [s["stage"] for s in r["stages"]] == ["perc", "text", "vis"] and r["stages"][0]["updates"] == 0
    m = run_arm("merged", net, sets, tests, protos, p, 0)
    assert [s["stage"] for s in m["stages"]] == ["merged@1", "merged@3", "merged@5"]
    ev = evaluate(net, tests, protos, p, 0)
    assert set(ev) == {"perc", "text", "vis"} and len(ev["vis"]["correct"]) == 20
    v = ev["vis"]
    assert v["n_wrong"] == 20 - sum(v["correct"]) and v["n_wrong_perception"] <= v["n_wrong"]


@pytest.fixture(scope="module")
def arm_inputs(world, tmp_path_factory):
    p = small_params(split=[2, 2, 2], ckpt_every=0)
    protos = load_world(world)["protos"]
    net, _ = warmup(p, load_split(world, "warmup"), protos, 0, tmp_path_factory.mktemp("w"))
    return p, net, load_sets(world, {"keep": list(range(6))}, p, 0), load_tests(world, p), protos


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), k


# p_t_v: killed at the end of P (a stage boundary) with ckpt_every 2, again mid-T (update 3), then run to the end;
# capsft_t_v: killed mid caption-SFT (its noisy rows are redrawn from the stage's saved generator state)
@pytest.mark.parametrize("arm,stops", [("p_t_v", [2, 3]), ("capsft_t_v", [1])])
def test_interrupted_arm_resumes_to_identical_weights_and_metrics(arm_inputs, tmp_path, arm, stops):
    import copy

    p, base, sets, tests, protos = arm_inputs
    p = {**p, "ckpt_every": 2}
    torch.manual_seed(0)
    full_net = copy.deepcopy(base)
    full = run_arm(arm, full_net, sets, tests, protos, p, 0)
    ck = tmp_path / arm
    for stop in stops:
        torch.manual_seed(0)
        assert run_arm(arm, copy.deepcopy(base), sets, tests, protos, p, 0, ckpt=ck, stop_after=stop) is None
        assert json.loads((ck / "state.json").read_text())["step"] == stop
    torch.manual_seed(123)  # a restarted process: the global torch RNG comes from the checkpoint, not from here
    net = copy.deepcopy(base)
    resumed = run_arm(arm, net, sets, tests, protos, p, 0, ckpt=ck)
    _same(full_net, net)
    assert json.dumps(resumed["stages"]) == json.dumps(full["stages"])  # histories and every evaluation
    assert [s["updates"] for s in resumed["stages"]] == [2, 2, 2]


def test_run_arms_keeps_finished_arms_and_drops_stale_state(arm_inputs, tmp_path):
    import copy

    p, base, sets, tests, protos = arm_inputs
    p = {**p, "split": [1, 1, 1]}
    args = (base, {"vis": {"acc": 0.5}}, sets, tests, protos)
    first = run_arms(["base", "v_only"], *args, p, 0, tmp_path)
    assert first["base"]["stages"][0]["eval"] == {"vis": {"acc": 0.5}} and (tmp_path / "v_only.json").exists()
    assert not (tmp_path / "v_only").exists()  # the finished arm's training state is gone
    assert json.dumps(run_arms(["v_only"], *args, p, 0)["v_only"]["stages"]) == json.dumps(first["v_only"]["stages"])
    kept = json.loads((tmp_path / "v_only.json").read_text())
    kept["stages"][0]["eval"]["vis"]["acc"] = -1.0  # a kept result is read back, not retrained ...
    (tmp_path / "v_only.json").write_text(json.dumps(kept))
    assert run_arms(["v_only"], *args, {**p, "ckpt_every": 7}, 0, tmp_path)["v_only"]["stages"][0]["eval"]["vis"][
        "acc"] == -1.0
    run_arm("t_p_v", copy.deepcopy(base), sets, tests, protos, p, 0, ckpt=tmp_path / "t_p_v", stop_after=1)
    assert (tmp_path / "t_p_v" / "state.json").exists()
    other = run_arms(["v_only"], *args, {**p, "lr": 0.01}, 0, tmp_path)  # ... unless the parameters changed
    assert other["v_only"]["stages"][0]["eval"]["vis"]["acc"] >= 0
    assert not (tmp_path / "t_p_v").exists()  # the other parameters' state is dropped
