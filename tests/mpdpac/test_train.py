"""Masked-diffusion training: the loss, and stop → resume ends with the same weights (core.checkpoint)."""

from __future__ import annotations

import torch

from paperflow.core.checkpoint import load_weights
from paperflow.mpdpac.train import mdm_loss, train_model
from tests.mpdpac.conftest import MODEL

P = {"seed": 1, "steps": 6, "batch_size": 4, "lr": 0.003, "weight_decay": 0.01, "warmup": 0.2, "grad_clip": 1.0,
     "ckpt_every": 2, "eos_weight": 1.0, "model": MODEL}


def test_stop_and_resume_gives_identical_weights(scenes, tmp_path):
    full = tmp_path / "full.safetensors"
    train_model(P, scenes, full, ckpt_dir=tmp_path / "ck_full")
    part = tmp_path / "part.safetensors"
    assert train_model(P, scenes, part, ckpt_dir=tmp_path / "ck", stop_after=3) is None and not part.exists()
    res = train_model(P, scenes, part, ckpt_dir=tmp_path / "ck")
    assert res is not None and res["steps"] == 6
    a, b = load_weights(full), load_weights(part)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_loss_only_on_masked_answer_tokens(tiny_model):
    g = torch.Generator().manual_seed(0)
    vis = torch.full((3, 9), 3)
    ans = torch.tensor([[5, 8, 4, 1, 1, 1]] * 3)
    length = torch.tensor([6, 6, 4])
    loss = mdm_loss(tiny_model, vis, ans, length, {"mask": 0, "sep": 2, "eos": 1}, g)
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0
    loss.backward()
    assert tiny_model.net.embed.weight.grad is not None
    tiny_model.zero_grad()


def test_eos_weight_scales_only_the_padding_terms(tiny_model):
    """Issue 17: EOS padding dominated the loss and the backbone never read the image. eos_weight multiplies
    only the EOS targets' terms: 1 is the LLaDA SFT form, 0 leaves the content terms alone, and the
    content + EOS parts add up (same masks: the generator is reseeded)."""
    vis = torch.full((4, 9), 3)
    vis[:, 4] = 17
    ans = torch.tensor([[5, 8, 4, 1, 1, 1]] * 4)
    length = torch.tensor([6, 6, 5, 6])
    sp = {"mask": 0, "sep": 2, "eos": 1}

    def loss(w: float) -> torch.Tensor:
        with torch.no_grad():
            return mdm_loss(tiny_model, vis, ans, length, sp, torch.Generator().manual_seed(3), w)

    full, none, tenth = loss(1.0), loss(0.0), loss(0.1)
    assert 0 < none < tenth < full
    torch.testing.assert_close(tenth, none + 0.1 * (full - none))
    assert torch.equal(mdm_loss(tiny_model, vis, ans, length, sp, torch.Generator().manual_seed(3)).detach(), full)


def test_default_config_downweights_eos():
    from paperflow.core.config import validate_config
    from paperflow.mpdpac import plan

    cfg = validate_config({"results_dir": "r", "data_dir": "d", "models_dir": "m", "mpdpac": {"enabled": True}})
    assert plan.train_params(cfg["mpdpac"], 0)["eos_weight"] == 0.1


def test_stratified_t_has_one_draw_per_bin_and_uniform_is_unchanged():
    from paperflow.mpdpac.train import draw_t

    t = draw_t(16, torch.Generator().manual_seed(3), "stratified")
    assert sorted((t * 16).floor().long().tolist()) == list(range(16))
    u = draw_t(16, torch.Generator().manual_seed(3), "uniform")
    assert torch.equal(u, torch.rand(16, generator=torch.Generator().manual_seed(3)))
    import pytest

    with pytest.raises(ValueError, match="t_sampler"):
        draw_t(4, torch.Generator(), "beta")


def test_curriculum_draws_only_easy_scenes_before_its_end():
    import numpy as np

    from paperflow.mpdpac.train import batch_indices

    easy = np.array([2, 5, 7])
    rng = np.random.default_rng(0)
    early = np.concatenate([batch_indices(s, 32, 100, easy, 10, rng) for s in range(10)])
    assert set(early.tolist()) <= {2, 5, 7}
    late = batch_indices(10, 256, 100, easy, 10, rng)
    assert not set(late.tolist()) <= {2, 5, 7}
    # curriculum off: the same draws as the plain uniform index draw
    assert np.array_equal(batch_indices(0, 8, 100, easy, 0, np.random.default_rng(1)),
                          np.random.default_rng(1).integers(0, 100, size=8))


def _train_lrs(scenes, tmp_path, monkeypatch, **over) -> list[float]:
    """The lr of every step of a short training run (the scheduler train_model builds, recorded)."""
    import paperflow.core.schedule as schedule

    made, lrs = [], []  # lrs: the lr each optimizer step used (read when the scheduler steps after it)
    real = schedule.lambda_lr

    def spy(opt, total, warmup, floor=0.0):  # type: ignore[no-untyped-def]
        sched = real(opt, total, warmup, floor)
        step = sched.step

        def recording_step(*a, **k):  # type: ignore[no-untyped-def]
            lrs.append(opt.param_groups[0]["lr"])
            return step(*a, **k)

        sched.step = recording_step
        made.append(sched)
        return sched

    monkeypatch.setattr(schedule, "lambda_lr", spy)
    train_model({**P, "steps": 10, "warmup": 2, **over}, scenes, tmp_path / "w.safetensors")
    assert len(made) == 1 and len(lrs) == 10
    return lrs


def test_lr_floor_one_keeps_the_lr_constant_after_the_warmup(scenes, tmp_path, monkeypatch):
    """The tiny tier trains at a constant lr after the warm-up (lr_floor 1, issue 17); the schema default
    (lr_floor 0) decays it by a cosine to 0."""
    const = _train_lrs(scenes, tmp_path, monkeypatch, lr_floor=1.0)
    assert const[:2] == [0.0015, 0.003] and all(x == 0.003 for x in const[2:])
    cos = _train_lrs(scenes, tmp_path, monkeypatch)
    assert cos[:2] == const[:2] and all(a > b for a, b in zip(cos[2:], cos[3:])) and cos[-1] < 0.0003


def test_d_ff_sets_the_mlp_width_and_none_is_four_times_d_model():
    from paperflow.mpdpac.model import TinyMDM, model_config

    assert TinyMDM(model_config(20, {**MODEL, "d_ff": 24})).net.blocks[0].mlp.fc.out_features == 24
    assert TinyMDM(model_config(20, {**MODEL, "d_ff": None})).net.blocks[0].mlp.fc.out_features == 64


def test_tiny_config_trains_the_recipe_that_grounds():
    """config/config.yaml's tiny tier (issue 17): 3 layers, MLP width 128, 2,500 steps at a constant lr."""
    from pathlib import Path

    import yaml

    from paperflow.core.config import validate_config
    from paperflow.mpdpac import plan

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "config/config.yaml").read_text())
    p = plan.train_params(validate_config(raw)["mpdpac"], 0)
    assert (p["model"]["n_layers"], p["model"]["d_ff"], p["steps"], p["lr_floor"]) == (3, 128, 2500, 1.0)


def test_on_step_sees_every_step_and_leaves_the_training_unchanged(scenes, tmp_path):
    """bench/mpdpac_grounding.py scores validation scenes in `on_step`; the weights must not depend on it."""
    seen = []

    def on_step(done, model):  # type: ignore[no-untyped-def]
        seen.append((done, model.training))
        model.eval()
        with torch.no_grad():
            model(torch.full((2, 9), 3))
        model.train()

    train_model(P, scenes, tmp_path / "a.safetensors")
    train_model(P, scenes, tmp_path / "b.safetensors", on_step=on_step)
    assert seen == [(i, True) for i in range(1, 7)]
    a, b = load_weights(tmp_path / "a.safetensors"), load_weights(tmp_path / "b.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
