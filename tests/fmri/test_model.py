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


def _tiny_pretrain_setup(fs5):
    from paperflow.fmri.geometry import build_parcel

    P = build_parcel(fs5, 12, "surface", n_init=1)
    rng = np.random.default_rng(0)
    runs = [rng.standard_normal((40, P.D)).astype(np.float32) for _ in range(3)]
    p = {"tag": "parcel-s0", "space": "parcel", "seed": 0, "batch_size": 4, "steps": 6, "base_lr": 1e-2,
         "weight_decay": 0.05, "warmup_frac": 0.25, "mask_ratio": 0.75, "clip_frames": 8, "eval_every": 2,
         "val_clips": 4,
         "model": {"t_patch": 4, "dim": 16, "depth": 1, "heads": 2, "dec_dim": 16, "dec_depth": 1, "dec_heads": 2}}
    return P, runs, p


def _weights(path):
    from paperflow.core.checkpoint import load_weights

    return load_weights(path)


def test_pretraining_resumed_after_interruption_equals_uninterrupted_run(tmp_path, fs5):
    """Stop after 2 of 6 steps, rerun: the final and the best weights are equal (torch.equal) to an
    uninterrupted run's, and so is the history; the checkpoint is safetensors + JSON only."""
    from paperflow.core.checkpoint import has_checkpoint
    from paperflow.fmri.train import load_params, pretrain

    P, runs, p = _tiny_pretrain_setup(fs5)
    full = pretrain(P, runs[:2], runs[2:], p, tmp_path / "full")
    half = pretrain(P, runs[:2], runs[2:], p, tmp_path / "half", stop_after=2)
    assert half["history"][-1]["step"] == 2 and has_checkpoint(tmp_path / "half" / "ckpt")
    assert not list(tmp_path.rglob("*.pt")) and not list(tmp_path.rglob("*.pkl"))
    resumed = pretrain(P, runs[:2], runs[2:], p, tmp_path / "half")
    assert resumed["history"] == full["history"] and resumed["best_val_loss"] == full["best_val_loss"]
    assert resumed["val_loss_init"] == full["val_loss_init"]
    for name in ("ckpt/model.safetensors", "best.safetensors"):
        a, b = _weights(tmp_path / "full" / name), _weights(tmp_path / "half" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    # the run did train (the weights moved) and the best weights carry their parameters
    import json

    assert json.loads(json.dumps(p)) == load_params(tmp_path / "full" / "best.safetensors")
    first = _weights(tmp_path / "half" / "best.safetensors")
    assert any(not torch.equal(first[k], torch.zeros_like(first[k])) for k in first if "head" in k)


def test_checkpoint_of_other_parameters_is_not_resumed(tmp_path, fs5):
    from paperflow.fmri.train import pretrain

    P, runs, p = _tiny_pretrain_setup(fs5)
    pretrain(P, runs[:2], runs[2:], {**p, "base_lr": 5e-2}, tmp_path / "run", stop_after=2)
    res = pretrain(P, runs[:2], runs[2:], {**p, "steps": 2}, tmp_path / "run")
    ref = pretrain(P, runs[:2], runs[2:], {**p, "steps": 2}, tmp_path / "ref")
    assert res["history"] == ref["history"]


def test_embedding_only_visible_tubelets_and_broadcast_loss_mask_equal_the_full_computation():
    """Issue 24: encode() embeds only the visible tubelets and masked_loss keeps its mask broadcast; the
    forward values are bit-identical to embedding all P patches then gathering, and to the materialised mask."""
    P, S, B = 30, 12, 4
    valid = np.random.default_rng(0).random((P, S)) > 0.3
    torch.manual_seed(0)
    m = MAE(P, S, valid, n_frames=8, t_patch=4, dim=16, depth=1, heads=2, dec_dim=8, dec_depth=1, dec_heads=2)
    with torch.no_grad():
        m.head.weight.normal_(0, 0.1)
    x = torch.randn(B, 8, P, S)
    vis = m.sample_visible(B, torch.Generator().manual_seed(1))
    # the full computation (before issue 24)
    tok = m.embed(m.tubelets(x)) + m.pos_s + m.pos_t
    tok = torch.gather(tok, 2, vis[:, None, :, None].expand(B, m.nt, vis.shape[1], tok.shape[-1])).reshape(B, -1, tok.shape[-1])
    h = torch.cat([m.cls.expand(B, -1, -1), tok], dim=1)
    for blk in m.blocks:
        h = blk(h)
    assert torch.equal(m.encode(x, vis), m.norm(h))
    loss, pred, visible = m(x, vis=vis)
    target = x.reshape(B, m.nt, m.t, P, S)[:, :, ::m.stride].permute(0, 1, 3, 2, 4)
    mask = (m.valid[None, None, :, None, :] & ~visible[:, None, :, None, None]).expand_as(pred).float()
    assert torch.equal(loss, ((pred - target) ** 2 * mask).sum() / mask.sum().clamp_min(1.0))
