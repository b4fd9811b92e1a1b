"""MAE: masking counts, loss on valid masked positions only, initial loss ~1, resumable training."""

import numpy as np
import pytest
import torch

from paperflow.fmri.model import MAE, n_visible


@pytest.mark.parametrize("n,exp", [(490, 48), (400, 39), (465, 46), (136, 13), (100, 9), (176, 17)])
def test_visible_count_counts_background(n, exp):
    assert n_visible(n, 0.9) == exp


def _model(valid, **kw):
    torch.manual_seed(0)
    return MAE(valid.shape[0], valid.shape[1], valid, dim=32, depth=1, heads=2, dec_dim=32, dec_depth=1, dec_heads=2, **kw)


def test_visible_patches_only_non_empty_and_loss_ignores_background():
    rng = np.random.default_rng(0)
    valid = rng.random((20, 9)) < 0.7
    valid[:6] = False  # 6 empty (background) patches
    m = _model(valid)
    vis = m.sample_visible(64, torch.Generator().manual_seed(1))
    assert vis.shape == (64, n_visible(20, 0.9)) and bool(m.nonempty[vis].all())
    vm = torch.from_numpy(valid)
    x = torch.randn(3, 16, 20, 9) * vm.float()
    v = m.sample_visible(3, torch.Generator().manual_seed(2))
    visible = torch.zeros(3, 20, dtype=torch.bool).scatter(1, v, True)
    pred = torch.randn(3, 4, 20, 2, 9)
    base = m.masked_loss(pred, x, visible)
    x2 = x.clone()
    x2[:, :, ~vm] = 1e3  # background pixels
    x2[torch.arange(3)[:, None], :, v] = -1e3  # visible patches
    x2[:, 1::2] = 1e3  # frames that are not predicted (t_pred_stride = 2)
    assert torch.allclose(m.masked_loss(pred, x2, visible), base)
    x3 = x.clone()
    masked_valid = torch.nonzero(vm & ~visible[0][:, None])[0]
    x3[0, 0, masked_valid[0], masked_valid[1]] += 10.0  # one masked, valid, predicted position
    assert not torch.allclose(m.masked_loss(pred, x3, visible), base)


def test_initial_loss_is_about_one():
    valid = np.ones((30, 16), bool)
    m = _model(valid)
    x = torch.randn(8, 16, 30, 16)
    loss = m(x, generator=torch.Generator().manual_seed(0))[0].item()
    assert abs(loss - 1.0) < 0.05  # zero-initialized head predicts 0 for unit-variance targets


def test_training_is_resumable_and_deterministic(tmp_path, fs5):
    from paperflow.fmri.geometry import build_parcel
    from paperflow.fmri.train import pretrain

    P = build_parcel(fs5, 12, "surface", n_init=1)
    rng = np.random.default_rng(0)
    runs = [rng.standard_normal((40, P.D)).astype(np.float32) for _ in range(3)]
    p = {"seed": 0, "batch_size": 4, "steps": 4, "base_lr": 1e-2, "weight_decay": 0.05, "warmup_frac": 0.25,
         "mask_ratio": 0.75, "clip_frames": 8, "eval_every": 2, "val_clips": 4,
         "model": {"t_patch": 4, "dim": 16, "depth": 1, "heads": 2, "dec_dim": 16, "dec_depth": 1, "dec_heads": 2}}
    full = pretrain(P, runs[:2], runs[2:], p, tmp_path / "full")
    # interrupted after 2 steps, then resumed from last.pt
    half = pretrain(P, runs[:2], runs[2:], {**p, "steps": 4, "stop_after": 2}, tmp_path / "half")
    assert half["history"][-1]["step"] == 2
    resumed = pretrain(P, runs[:2], runs[2:], p, tmp_path / "half")
    assert [h["step"] for h in resumed["history"]] == [2, 4]
    assert resumed["history"][-1]["val_loss"] == pytest.approx(full["history"][-1]["val_loss"], rel=1e-6)
    assert resumed["history"][-1]["train_loss"] == pytest.approx(full["history"][-1]["train_loss"], rel=1e-6)
