"""The alignment heads: the expectation head's reduction to the mean-token head, its sentence-level form,
padding handling and the BN fold used at inference."""

from __future__ import annotations

import torch

from paperflow.expalign.heads import SentenceBNHead, TokenHead


def _inputs(B=3, C=8, H=4, W=5, P=6, L=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, C, H, W, generator=g)
    mask = torch.ones(P, L, dtype=torch.bool)
    mask[0, 2:] = False
    mask[3, 3:] = False
    w = torch.randn(P, L, C, generator=g) * mask[..., None]
    return x, w, mask


def test_uniform_token_weights_reduce_exactly_to_mean_token_head():
    x, w, mask = _inputs()
    exp, mean = TokenHead(8, "expect"), TokenHead(8, "mean")
    mean.load_state_dict(exp.state_dict())
    # force a uniform softmax: every real token gets the same region-mean similarity
    exp._weights = lambda s, m: mean._weights(s, m)  # type: ignore[method-assign]
    torch.testing.assert_close(exp(x, w, mask), mean(x, w, mask), rtol=0, atol=0)
    # and the mean-token head is the dot product with the mean token embedding (sentence form)
    wbar = (w * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    ref = torch.einsum("bchw,pc->bphw", mean.bn(x), wbar) * mean.temperature.exp() + mean.bias
    torch.testing.assert_close(mean(x, w, mask), ref, rtol=1e-5, atol=1e-5)


def test_expectation_head_is_a_sentence_dot_product_with_image_adaptive_weights():
    x, w, mask = _inputs(seed=1)
    head = TokenHead(8, "expect")
    S = head(x, w, mask)
    a = head.token_weights(x, w, mask)  # [B, P, L]
    assert torch.allclose(a.sum(-1), torch.ones(3, 6)) and (a[:, 0, 2:] == 0).all()  # padding gets no weight
    wbar = torch.einsum("bpl,plc->bpc", a, w)
    ref = torch.einsum("bchw,bpc->bphw", head.bn(x), wbar) * head.temperature.exp() + head.bias
    torch.testing.assert_close(S, ref, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a[0], a[1])  # the weights depend on the image


def test_max_head_ignores_padding_and_sentence_head_normalises():
    x, w, mask = _inputs(seed=2)
    mx = TokenHead(8, "max")
    w_pad = w.clone()
    w_pad[~mask] = 100.0  # garbage in padding rows must not matter
    torch.testing.assert_close(mx(x, w, mask), mx(x, w_pad, mask))
    sh = SentenceBNHead(8)
    s = torch.randn(6, 8)
    torch.testing.assert_close(sh(x, s), sh(x, 3.0 * s))  # L2-normalised sentence embedding


def test_fused_head_matches_bn_head_in_eval_mode():
    x, w, mask = _inputs(seed=3)
    head = TokenHead(8, "expect")
    head.train()
    for _ in range(3):
        head(x * 2 + 1, w, mask)  # non-trivial running statistics
    with torch.no_grad():
        head.bn.weight.uniform_(0.5, 1.5)
        head.bn.bias.uniform_(-0.5, 0.5)
    head.eval()
    ref = head(x, w, mask)
    head.fuse(w)
    torch.testing.assert_close(head(x, w, mask), ref, rtol=1e-4, atol=1e-4)
    head.unfuse()


def test_vit_encoder_option_gives_the_same_grid_as_the_cnn():
    """`model.encoder: vit` uses the shared paperflow.nn.vision.TinyViT patch tokens as the map."""
    from paperflow.core.config import validate_config
    from paperflow.expalign.model import GroundingNet

    imgs = torch.randint(0, 255, (2, 32, 32, 3), dtype=torch.uint8)
    txt = {"tokens": torch.randn(5, 4, 24), "mask": torch.ones(5, 4, dtype=torch.bool), "sentence": torch.randn(5, 24)}
    shapes = []
    for enc in ("cnn", "vit"):
        cfg = validate_config({"expalign": {"enabled": True, "model": {"encoder": enc, "dim": 16, "width": 8,
                                                                       "vit_layers": 1, "vit_heads": 2}}})
        from paperflow.expalign import plan

        p = plan.train_params(cfg["expalign"], "C", 0)
        shapes.append(tuple(GroundingNet(p["model"], "expect", 24)(imgs, txt).shape))
    assert shapes[0] == shapes[1] == (2, 5, 8, 8)
