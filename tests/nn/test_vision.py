"""paperflow.nn.vision: shapes, the training-free last-block swaps (SCLIP / ClearCLIP), the contrastive
loss, the resumable training loop (stop + resume == uninterrupted, torch.equal), modality gap and mAP."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from paperflow.nn.vision import (TextEncoder, TinyViT, ViTConfig, clip_loss, fit, init_logit_scale,
                                 masked_mean, modality_gap, multilabel_map)


def vit(**kw) -> TinyViT:
    torch.manual_seed(0)
    return TinyViT(ViTConfig(**{"image_size": 16, "patch_size": 4, "d_model": 32, "n_heads": 4, "n_layers": 2,
                                "embed_dim": 24, **kw})).eval()


def images(B: int = 3) -> torch.Tensor:
    return torch.rand(B, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def test_shapes_and_default_is_vanilla():
    m, x = vit(), images()
    out = m(x, output_attentions=True)
    assert out.cls.shape == (3, 24) and out.patches.shape == (3, 16, 24) and out.hidden.shape == (3, 17, 32)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 17, 17)
    assert torch.allclose(out.attentions[-1].sum(-1), torch.ones(3, 4, 17))
    # without attention weights the vanilla blocks run the fused SDPA kernel: the same map to float rounding
    assert m(x, last_block="vanilla").attentions is None
    torch.testing.assert_close(m(x, last_block="vanilla").patches, out.patches, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="images must be"):
        m(torch.rand(2, 3, 8, 8))
    with pytest.raises(ValueError, match="last_block"):
        m(x, last_block="nope")


def test_sclip_swaps_only_the_last_block():
    m, x = vit(), images()
    a = m(x, output_attentions=True)
    b = m(x, last_block="sclip", output_attentions=True)
    assert torch.equal(a.attentions[0], b.attentions[0])  # earlier blocks untouched
    assert torch.allclose(b.attentions[-1].sum(-1), torch.full((3, 4, 17), 2.0))  # q-q + k-k maps
    assert not torch.allclose(a.patches, b.patches)
    # the correlative maps are symmetric before the softmax: q-q logits are a Gram matrix
    w = b.attentions[-1]
    assert (w.diagonal(dim1=-2, dim2=-1) >= w.amax(-1) - 1.0).all()  # rows are dominated by self-similarity


def test_clearclip_drops_residual_and_mlp():
    m, x = vit(), images()
    out = m(x, last_block="clearclip")
    # recompute by hand: the last block's output is its attention output alone
    h = m.ln_pre(torch.cat([m.cls_token.expand(3, -1, -1), m.patch_embed(x).flatten(2).transpose(1, 2)], 1)
                 + m.pos_embed)
    h, _ = m.blocks[0](h)
    a, _ = m.blocks[1].attention(m.blocks[1].ln_1(h), "clearclip")
    assert torch.allclose(out.hidden, a, atol=1e-6)
    assert torch.allclose(out.patches, m.proj(m.ln_post(a))[:, 1:], atol=1e-6)


def test_text_encoder_table_and_projection():
    torch.manual_seed(0)
    t = TextEncoder(8, vocab_size=5, in_dim=6)
    assert t(torch.tensor([[0, 4]])).shape == (1, 2, 8)
    assert t(torch.randn(3, 6)).shape == (3, 8)
    with pytest.raises(ValueError):
        TextEncoder(8)
    x = torch.arange(12.0).view(1, 3, 4)
    assert torch.allclose(masked_mean(x, torch.tensor([[1, 1, 0]])), x[0, :2].mean(0, keepdim=True))


def test_clip_loss_rewards_alignment_and_is_symmetric():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 16, generator=g)
    scale = torch.tensor(math.log(50.0))
    aligned = clip_loss(a, a, scale)
    shuffled = clip_loss(a, a[torch.randperm(8, generator=g)], scale)
    assert aligned < 0.1 < shuffled
    b = torch.randn(8, 16, generator=g)
    assert torch.allclose(clip_loss(a, b, scale), clip_loss(b, a, scale))
    # identity targets == the plain loss; duplicated texts: both copies count as positives
    assert torch.allclose(clip_loss(a, b, scale, targets=torch.eye(8)), clip_loss(a, b, scale))
    dup = torch.cat([a[:4], a[:4]])
    t = torch.eye(8) + torch.eye(8).roll(4, 1)
    # two equal positives per row: the soft cross-entropy sits at its floor, the target's entropy log 2
    assert clip_loss(dup, dup, scale, targets=t).item() == pytest.approx(math.log(2), abs=1e-4)
    assert clip_loss(dup, dup.roll(1, 0), scale, targets=t) > 1.0
    assert init_logit_scale(0.07).item() == pytest.approx(math.log(1 / 0.07))


class _Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.image = TinyViT(ViTConfig(image_size=8, patch_size=4, d_model=16, n_heads=2, n_layers=1, embed_dim=8))
        self.text = TextEncoder(8, vocab_size=4)
        self.logit_scale = init_logit_scale()


def _loss(m: _Pair):
    def f(step: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(1000 + step)
        y = torch.randint(0, 4, (6,), generator=g)
        x = torch.rand(6, 3, 8, 8, generator=g) + y.view(-1, 1, 1, 1) * 0.5
        x = x + 0.01 * torch.randn_like(x)  # uses the global torch RNG: restored on resume
        return clip_loss(m.image(x).cls, m.text(y), m.logit_scale, targets=(y[:, None] == y[None]).float())
    return f


def test_fit_stop_and_resume_is_bit_identical(tmp_path):
    torch.manual_seed(5)
    a = _Pair()
    ra = fit(a, _loss(a), steps=12, lr=3e-3, ckpt_dir=tmp_path / "a", ckpt_every=5)
    torch.manual_seed(5)
    b = _Pair()
    rb1 = fit(b, _loss(b), steps=12, lr=3e-3, ckpt_dir=tmp_path / "b", ckpt_every=5, stop_after=7)
    assert rb1.step == 7
    torch.manual_seed(99)  # a different process state; the checkpoint restores the RNG
    b2 = _Pair()
    rb2 = fit(b2, _loss(b2), steps=12, lr=3e-3, ckpt_dir=tmp_path / "b", ckpt_every=5)
    assert rb2.resumed_from == 7 and rb2.step == 12 and rb2.losses == ra.losses
    for (k, v), (k2, v2) in zip(a.state_dict().items(), b2.state_dict().items()):
        assert k == k2 and torch.equal(v, v2), k
    assert ra.losses[-1] < ra.losses[0]


def test_modality_gap():
    g = np.random.default_rng(0)
    x = g.normal(size=(50, 8))
    assert modality_gap(x, x) == pytest.approx(0.0, abs=1e-12)
    e = np.eye(8)
    assert modality_gap(e[[0]], e[[1]]) == pytest.approx(math.sqrt(2))


def test_multilabel_map_matches_sklearn_and_skips_empty_classes():
    from sklearn.metrics import average_precision_score

    g = np.random.default_rng(0)
    y = (g.random((40, 4)) < 0.3).astype(int)
    y[:, 2] = 0  # no positives: undefined AP
    s = g.random((40, 4)) + y
    r = multilabel_map(y, s)
    assert np.isnan(r.per_class[2]) and r.n_classes_scored == 3
    want = np.mean([average_precision_score(y[:, c], s[:, c]) for c in (0, 1, 3)])
    assert r.map == pytest.approx(want)
    perfect = multilabel_map(y, y.astype(float))
    assert perfect.map == pytest.approx(1.0)
    assert np.isnan(multilabel_map(np.zeros((3, 2)), np.zeros((3, 2))).map)
    with pytest.raises(ValueError):
        multilabel_map(y, s[:, :3])
