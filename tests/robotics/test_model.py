import numpy as np
import torch

from paperflow.robotics.model import LAM, LAMConfig, lam_loss

CFG = LAMConfig(image_size=32, feat_channels=8, grid=2, d_model=16, n_heads=2, n_layers=1, d_z=8, n_codes=8)


def _batch(B=6, V=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    P = CFG.grid**2
    return torch.randn(B, V, P, CFG.feat_channels, generator=g), torch.randn(B, V, P, CFG.feat_channels, generator=g)


def test_stem_frozen_and_seeded():
    a, b = LAM(CFG), LAM(CFG)
    img = torch.randint(0, 255, (2, 32, 32, 3), dtype=torch.uint8)
    assert torch.equal(a.stem(img), b.stem(img)) and a.stem(img).shape == (2, 4, 8)
    assert not any(p.requires_grad for p in a.stem.parameters())


def test_cross_view_terms_only_in_mvp():
    torch.manual_seed(0)
    m = LAM(CFG)
    f0, f1 = _batch()
    mask = torch.ones(6, 2)
    _, logs_s = lam_loss(m, f0, f1, mask, "single")
    _, logs_m = lam_loss(m, f0, f1, mask, "mvp")
    assert logs_s["rec_cross"] == 0.0 and logs_m["rec_cross"] > 0
    # in MVP, view 0's decoder target depends on view 1's latent: the encoder gets gradient from
    # view 1's *input* through the cross term even when view 0's self term is masked out
    f0.requires_grad_(True)
    loss, _ = lam_loss(m, f0, f1, torch.tensor([[1.0, 1.0]] * 6), "mvp")
    loss.backward()
    assert f0.grad[:, 1].abs().sum() > 0


def test_masks_drop_terms_of_missing_views():
    torch.manual_seed(0)
    m = LAM(CFG)
    f0, f1 = _batch()
    full = torch.ones(6, 2)
    only0 = torch.tensor([[1.0, 0.0]] * 6)
    l_only0, _ = lam_loss(m, f0, f1, only0, "mvp")
    # view 1 garbage must not matter when it is masked out
    f0b, f1b = f0.clone(), f1.clone()
    f0b[:, 1] = 1e3
    f1b[:, 1] = -1e3
    l_only0_b, _ = lam_loss(m, f0b, f1b, only0, "mvp")
    assert torch.allclose(l_only0, l_only0_b)
    l_full, _ = lam_loss(m, f0, f1, full, "mvp")
    assert not torch.allclose(l_full, l_only0)


def test_vq_straight_through_and_dead_code_reset():
    torch.manual_seed(0)
    m = LAM(CFG)
    h = torch.randn(4, CFG.n_queries, CFG.d_z, requires_grad=True)
    z, vq, idx = m.vq(h)
    assert torch.allclose(z, m.vq.codebook[idx], atol=1e-6)
    z.sum().backward()
    assert torch.allclose(h.grad, torch.ones_like(h))  # straight-through
    m.vq.usage.zero_()
    m.vq.usage[0] = 5
    n = m.vq.reset_dead(torch.Generator().manual_seed(0))
    assert n == CFG.n_codes - 1 and m.vq.usage.sum() == 0
    assert torch.allclose(m.vq.codebook[1:], m.vq.codebook[:1].expand(CFG.n_codes - 1, -1), atol=0.1)


def test_training_reduces_loss():
    torch.manual_seed(0)
    m = LAM(CFG)
    f0, f1 = _batch(B=16)
    f1 = f0 + 0.5 * f0.roll(1, dims=2)  # a learnable transformation of the current frame
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=3e-3)
    first = None
    for _ in range(60):
        loss, _ = lam_loss(m, f0, f1, torch.ones(16, 2), "mvp")
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.5 * first


def test_residual_decoder_starts_as_copy_and_learns_the_change():
    """lam.net.residual: the zero-initialised output makes decode(f0, z) == f0 at init (copying is free),
    so the reconstruction loss starts at |e(o_t+k) - e(o_t)|^2 and only the change is left to explain."""
    from dataclasses import replace

    torch.manual_seed(0)
    m = LAM(replace(CFG, residual=True))
    f0, f1 = _batch()
    z, _, _, _ = m.encode(f0[:, 0], f1[:, 0])
    assert torch.equal(m.decode(f0[:, 0], z), f0[:, 0])
    loss, _ = lam_loss(m, f0, f1, torch.ones(6, 2), "single")
    loss.backward()
    assert m.dec_out.weight.grad.abs().sum() > 0
    assert not torch.equal(LAM(CFG).decode(f0[:, 0], z), f0[:, 0])  # the default decoder is not a copy
