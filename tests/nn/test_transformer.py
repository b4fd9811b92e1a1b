"""paperflow.nn.transformer: masking, RoPE's relative-position property, the hooks (hidden states, attention
maps, rotary rescaling, steering). Tiny float64 models on CPU; the whole file runs in about a second."""

from __future__ import annotations

import pytest
import torch

from paperflow.nn.transformer import Rotary, Transformer, TransformerConfig, apply_rotary

torch.set_default_dtype(torch.float32)


def model(causal: bool = True, **kw) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(**{"d_model": 32, "n_heads": 4, "n_layers": 3, "vocab_size": 50, "out_dim": 50,
                               "causal": causal, **kw})
    return Transformer(cfg).double().eval()


def tokens(B: int = 2, T: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 50, (B, T), generator=torch.Generator().manual_seed(seed))


def test_causal_mask_blocks_the_future():
    m, x = model(causal=True), tokens()
    y = x.clone()
    y[:, 6] = (y[:, 6] + 1) % 50  # change one later token
    a = m(x, output_hidden_states=True)
    b = m(y, output_hidden_states=True)
    for ha, hb in zip(a.hidden_states, b.hidden_states):
        assert torch.equal(ha[:, :6], hb[:, :6])  # earlier positions: bit-identical
    assert not torch.allclose(a.logits[:, 6:], b.logits[:, 6:])


def test_bidirectional_sees_the_future():
    m, x = model(causal=False), tokens()
    y = x.clone()
    y[:, 6] = (y[:, 6] + 1) % 50
    a, b = m(x), m(y)
    assert (a.logits[:, :6] - b.logits[:, :6]).abs().amax() > 1e-6


def test_rope_scores_depend_only_on_offsets():
    rot = Rotary(head_dim=16).double()
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g, dtype=torch.float64), torch.randn(16, generator=g, dtype=torch.float64)

    def score(m: float, n: float) -> torch.Tensor:
        cos, sin = rot.tables(torch.tensor([m, n], dtype=torch.float64))
        cos, sin = cos.double(), sin.double()
        return apply_rotary(q, cos[0], sin[0]) @ apply_rotary(k, cos[1], sin[1])

    for m, n in [(3, 1), (7, 2), (0, 5)]:
        for shift in (1, 13, 100):
            assert torch.allclose(score(m, n), score(m + shift, n + shift), atol=1e-10)
    assert not torch.allclose(score(3, 1), score(3, 2))  # but they do depend on the offset


def test_whole_model_is_invariant_to_a_common_position_shift():
    """No absolute position embedding: shifting every position by a constant leaves the outputs unchanged."""
    for causal in (True, False):
        m, x = model(causal=causal), tokens()
        T = x.shape[1]
        a = m(x, positions=torch.arange(T)).logits
        b = m(x, positions=torch.arange(T) + 37).logits
        assert torch.allclose(a, b, atol=1e-9)


def test_hidden_states_and_attention_maps():
    m, x = model(causal=True), tokens(B=2, T=7)
    out = m(x, output_hidden_states=True, output_attentions=True)
    cfg = m.cfg
    assert len(out.hidden_states) == cfg.n_layers + 1
    assert all(h.shape == (2, 7, cfg.d_model) for h in out.hidden_states)
    assert len(out.attentions) == cfg.n_layers
    for a in out.attentions:
        assert a.shape == (2, cfg.n_heads, 7, 7)
        assert torch.allclose(a.sum(-1), torch.ones(2, cfg.n_heads, 7, dtype=a.dtype))
        assert torch.all(a.triu(1) == 0)  # causal: no weight on future keys
    assert out.logits.shape == (2, 7, 50) and out.last_hidden.shape == (2, 7, cfg.d_model)
    plain = m(x)  # the fused path (no maps requested) computes the same function
    assert plain.hidden_states is None and plain.attentions is None
    assert torch.allclose(plain.logits, out.logits, atol=1e-10)


def test_padding_mask_hides_padded_keys():
    m = model(causal=False)
    x = tokens(B=1, T=8)
    pad = torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])
    y = x.clone()
    y[:, 5:] = (y[:, 5:] + 7) % 50  # change only padded tokens
    a = m(x, padding_mask=pad, output_attentions=True)
    b = m(y, padding_mask=pad)
    assert torch.allclose(a.logits[:, :5], b.logits[:, :5], atol=1e-10)
    assert torch.all(a.attentions[0][..., 5:] == 0)
    assert not torch.allclose(m(x).logits[:, :5], m(y).logits[:, :5])  # without the mask they would differ


def test_rescaled_rotary_frequencies_change_outputs():
    m, x = model(), tokens()
    base = m(x).logits
    m.rotary.position_scale = 4.0  # position interpolation
    scaled = m(x).logits
    m.rotary.position_scale = 1.0
    assert torch.equal(m(x).logits, base)
    m.rotary.inv_freq.mul_(0.25)  # or rescale the frequency buffer in place
    freq = m(x).logits
    assert not torch.allclose(base, scaled) and not torch.allclose(base, freq)
    assert torch.allclose(scaled, freq, atol=1e-10)  # the two rescalings are the same map


def test_steering_changes_only_downstream_hidden_states():
    m, x = model(), tokens()
    a = m(x, output_hidden_states=True)
    v = torch.randn(m.cfg.d_model, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    b = m(x, output_hidden_states=True, steer={2: v})
    for i in range(2):
        assert torch.equal(a.hidden_states[i], b.hidden_states[i])
    assert torch.allclose(b.hidden_states[2], a.hidden_states[2] + v)
    assert not torch.allclose(a.hidden_states[3], b.hidden_states[3])
    assert not torch.allclose(a.logits, b.logits)
    # suppression: removing a direction's component is a steer by minus that component
    d = v / v.norm()
    h1 = a.hidden_states[1]
    c = m(x, output_hidden_states=True, steer={1: -(h1 @ d)[..., None] * d})
    assert torch.allclose(c.hidden_states[1] @ d, torch.zeros(h1.shape[:2], dtype=h1.dtype), atol=1e-10)
    with pytest.raises(ValueError):
        m(x, steer={7: v})


def test_continuous_input_projection_and_config_checks():
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(d_model=16, n_heads=2, n_layers=1, input_dim=5, out_dim=3, causal=False))
    out = m(torch.randn(4, 6, 5))
    assert out.logits.shape == (4, 6, 3)
    with pytest.raises(ValueError):
        m(torch.zeros(4, 6, dtype=torch.long))  # no token embedding configured
    with pytest.raises(ValueError):
        TransformerConfig(d_model=30, n_heads=4, vocab_size=10)  # heads must split d_model evenly
    with pytest.raises(ValueError):
        TransformerConfig(d_model=16, n_heads=2)  # no input at all
    tied = Transformer(TransformerConfig(d_model=16, n_heads=2, vocab_size=11, out_dim=11, tie_embeddings=True))
    assert tied.head.weight is tied.embed.weight


def test_kv_cache_incremental_decoding_matches_the_full_forward():
    net, x = model(), tokens(B=3, T=12)
    full = net(x).logits
    cache = net.new_kv_cache(3, 12)
    parts = [net(x[:, :5], kv_cache=cache, cache_start=0).logits]  # prefill, then one position at a time
    parts += [net(x[:, t:t + 1], kv_cache=cache, cache_start=t).logits for t in range(5, 12)]
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-10)
    # recomputing from a middle position overwrites what was cached there (a decoder whose suffix changed)
    y = x.clone()
    y[:, 8:] = (y[:, 8:] + 1) % 50
    again = net(y[:, 8:], kv_cache=cache, cache_start=8).logits
    assert torch.allclose(again, net(y).logits[:, 8:], atol=1e-10)
    assert not torch.allclose(again, full[:, 8:])
    with pytest.raises(ValueError, match="outside"):
        net(x[:, :4], kv_cache=cache, cache_start=10)
    with pytest.raises(ValueError, match="causal"):
        model(causal=False).new_kv_cache(3, 12)
