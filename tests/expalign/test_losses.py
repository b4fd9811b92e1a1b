"""Top-K multi-positive loss, box in/out term and GACO (properties from the spec's algebra)."""

from __future__ import annotations

import torch

from paperflow.expalign import losses


def test_topk_pooling_k1_is_max_and_mean_pooling_is_mean():
    S = torch.randn(2, 3, 8, 8)
    Sn = S / S.abs().amax(dim=(1, 2, 3), keepdim=True)
    torch.testing.assert_close(losses.pooled_logits(S, 0.01, "topk"), Sn.flatten(2).amax(-1))
    assert losses.topk_k(0.01, 64) == 1 and losses.topk_k(0.05, 64) == 3
    torch.testing.assert_close(losses.pooled_logits(S, 0.05, "topk"), Sn.flatten(2).topk(3, -1).values.mean(-1))
    torch.testing.assert_close(losses.pooled_logits(S, 0.01, "mean"), Sn.flatten(2).mean(-1))


def test_multi_positive_target_and_ignored_prompts():
    S = torch.zeros(1, 4, 2, 2)
    S[0, 0] = 1.0
    S[0, 1] = 1.0
    S[0, 3] = 5.0  # huge score on an ignored prompt (neither positive nor verified negative)
    pos = torch.tensor([[True, True, False, False]])
    valid = torch.tensor([[True, True, True, False]])
    l = losses.topk_multi_positive(S, pos, valid, rho=0.25, temperature=1.0)
    Sn = S / 5.0
    logits = Sn.flatten(2).amax(-1)[0, :3]
    ref = -torch.log_softmax(logits, 0)[:2].mean()
    torch.testing.assert_close(l, ref)
    # an image without positives contributes nothing
    assert losses.topk_multi_positive(S, torch.zeros(1, 4, dtype=torch.bool)).item() == 0.0


def test_box_term_zero_for_a_map_concentrated_in_the_box_and_positive_otherwise():
    S = torch.full((1, 2, 8, 8), -1.0)
    S[0, 0, 2:4, 2:4] = 1.0
    box = torch.tensor([[8.0, 8.0, 8.0, 8.0]])  # pixels of a 32 x 32 image -> cells 2..3
    b, p = torch.tensor([0]), torch.tensor([0])
    assert losses.box_in_out(S, b, p, box, image_size=32).item() == 0.0
    bad = losses.box_in_out(S, b, torch.tensor([1]), box, image_size=32)
    torch.testing.assert_close(bad, torch.tensor(0.3))  # flat map: margin only


def test_gaco_detached_gradient_ignores_a_uniform_shift_and_live_differs():
    g = torch.Generator().manual_seed(0)
    S = torch.randn(2, 3, 4, 4, generator=g)
    M = torch.zeros(2, 3, 4, 4)
    M[0, 1, 1:3, 1:3] = 1
    M[1, 0, 0:2, :] = 1
    M[1, 2, 3, 3] = 1
    S1 = S.clone().requires_grad_(True)
    l_det = losses.gaco(S1, M, detach_advantage=True)
    l_det.backward()
    # sum_M A = 0 per image: the log-normaliser's gradient cancels, so the gradient sums to 0 per image
    # with respect to the normalised map (directional derivative along a uniform shift of Sn is zero)
    Sn = (S / S.abs().max()).requires_grad_(True)
    logq = torch.log_softmax(Sn.reshape(2, -1), 1)
    R = torch.sigmoid(Sn).reshape(2, -1).detach()
    Mf = M.reshape(2, -1)
    mu = (R * Mf).sum(1, keepdim=True) / Mf.sum(1, keepdim=True)
    sd = ((((R - mu) ** 2) * Mf).sum(1, keepdim=True) / Mf.sum(1, keepdim=True)).sqrt()
    A = ((R - mu) / (sd + 1e-6)).clamp(-5, 5) * Mf
    torch.testing.assert_close(A.sum(1), torch.zeros(2), atol=1e-4, rtol=0)
    (-(A * logq).sum() / Mf.sum()).backward()
    torch.testing.assert_close(Sn.grad.reshape(2, -1).sum(1), torch.zeros(2), atol=1e-5, rtol=0)
    S2 = S.clone().requires_grad_(True)
    losses.gaco(S2, M, detach_advantage=False).backward()
    assert torch.isfinite(S2.grad).all() and not torch.allclose(S1.grad, S2.grad)


def test_gaco_single_cell_mask_is_finite():
    S = torch.randn(1, 2, 4, 4, requires_grad=True)
    M = torch.zeros(1, 2, 4, 4)
    M[0, 0, 0, 0] = 1  # std 0 inside the mask
    losses.gaco(S, M).backward()
    assert torch.isfinite(S.grad).all()


def test_grid_masks_keep_small_objects():
    m = torch.zeros(2, 32, 32, dtype=torch.uint8)
    m[0, 0:8, 0:8] = 1  # covers cells (0,0),(0,1),(1,0),(1,1) of an 8 x 8 grid fully
    m[1, 13:15, 13:15] = 1  # a 2 x 2 object: under half of one cell
    g = losses.grid_masks(m, 8, 8)
    assert g[0].sum() == 4 and g[1].sum() == 1 and g[1, 3, 3]
