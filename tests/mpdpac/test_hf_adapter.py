"""The HF adapter implements the `Backbone` contract: on a tiny randomly initialised transformers Llama (built
from a config, nothing downloaded) and on a stand-in with LLaDA's remote-code rotary interface."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from paperflow.mpdpac.decode import decode
from paperflow.mpdpac.fixes import mrs_scale, paper_prior, random_prior, rotary_scaled
from paperflow.mpdpac.hf_adapter import HFBackbone

SPECIAL = {"mask": 0, "sep": 1, "bg": 2}


@pytest.fixture(scope="module")
def llama() -> HFBackbone:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                      attn_implementation="eager")
    return HFBackbone(LlamaForCausalLM(cfg))


def test_states_follow_lladas_convention(llama: HFBackbone):
    ids = torch.randint(3, 40, (2, 9))
    st = llama.states(ids, output_attentions=True)
    assert len(st.layer_states) == 3 and st.layer_states[0].shape == (2, 9, 32)
    assert st.attentions is not None and st.attentions[0].shape == (2, 4, 9, 9)
    with torch.no_grad():
        ref = llama.model(input_ids=ids).logits
    assert torch.allclose(llama.logits(st.layer_states[-1]), ref, atol=1e-5)  # the last state is post-norm
    assert llama.embedding_matrix().shape == (40, 32)


def test_override_replaces_every_position(llama: HFBackbone):
    e = llama.embedding_matrix().mean(dim=0).detach()
    a = llama.states(torch.randint(3, 40, (1, 4)), embed_override=e).layer_states[0]
    b = llama.states(torch.randint(3, 40, (1, 4)), embed_override=e).layer_states[0]
    assert torch.allclose(a, b)  # the ids no longer matter
    c = llama.states(torch.randint(3, 40, (1, 4))).layer_states[0]
    assert not torch.allclose(a, c)


def test_rotary_scaling_changes_logits_and_restores_exactly(llama: HFBackbone):
    ids = torch.randint(3, 40, (1, 20))
    with torch.no_grad():
        base = llama.logits(llama.states(ids).layer_states[-1])
        s = mrs_scale(8, beta=1.0, eta=8.0, tau0=0.6, s_max=3.0)
        with rotary_scaled(llama, s):  # type: ignore[arg-type]
            assert torch.allclose(llama.rotary_inv_freq(), llama._base * s)
            scaled = llama.logits(llama.states(ids).layer_states[-1])
        after = llama.logits(llama.states(ids).layer_states[-1])
    assert not torch.allclose(base, scaled, atol=1e-4)
    assert torch.equal(base, after)
    with pytest.raises(ValueError, match="shape"):
        llama.set_rotary_inv_freq(torch.ones(3))


def test_decode_runs_with_mps_on_the_adapter(llama: HFBackbone):
    visual = torch.randint(2, 40, (2, 6))
    pr = paper_prior(llama, k=2)  # type: ignore[arg-type]
    assert pr.U.shape == (32, 2)
    out = decode(llama, visual, answer_len=8, tokens_per_step=2, block_len=8, special=SPECIAL,  # type: ignore[arg-type]
                 diag_prior=pr, mps_prior=random_prior(pr, 1), lam=0.5, attention=True)
    assert out.answer.shape == (2, 8) and (out.answer != SPECIAL["mask"]).all()
    assert out.vis_attn is not None and out.vis_attn.shape == (2, 3, 4)
    assert ((out.vis_attn >= 0) & (out.vis_attn <= 1 + 1e-5)).all()


class _LladaRotary(nn.Module):
    """LLaDA's remote-code rotary interface: `rope_theta` and `get_rotary_embedding(seq_len, device)`."""

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        self.rope_theta, self.head_dim = theta, head_dim

    def get_rotary_embedding(self, seq_len: int, device: torch.device, *a, **k):
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        f = torch.outer(torch.arange(seq_len, dtype=torch.float), inv)
        pos = torch.cat((f, f), dim=-1)
        return pos.sin()[None, None], pos.cos()[None, None]


class _LladaStandIn(nn.Module):
    """One bidirectional attention block using the rotary tables, an LLaDA-style config and I/O."""

    def __init__(self, V: int = 30, D: int = 16, H: int = 2):
        super().__init__()
        self.config = SimpleNamespace(d_model=D, n_heads=H, n_layers=1)
        self.wte, self.ff_out = nn.Embedding(V, D), nn.Linear(D, V, bias=False)
        self.qkv, self.H = nn.Linear(D, 3 * D), H
        self.rotary_emb = _LladaRotary(D // H)

    def get_input_embeddings(self) -> nn.Module:
        return self.wte

    def get_output_embeddings(self) -> nn.Module:
        return self.ff_out

    @staticmethod
    def _rot(x, sin, cos):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(self, inputs_embeds, output_hidden_states=False, output_attentions=False, use_cache=False):
        B, T, D = inputs_embeds.shape
        q, k, v = self.qkv(inputs_embeds).view(B, T, 3, self.H, D // self.H).permute(2, 0, 3, 1, 4)
        sin, cos = self.rotary_emb.get_rotary_embedding(T, inputs_embeds.device)
        q, k = self._rot(q, sin, cos), self._rot(k, sin, cos)
        w = (q @ k.transpose(-1, -2) / (D // self.H) ** 0.5).softmax(-1)
        h = inputs_embeds + (w @ v).transpose(1, 2).reshape(B, T, D)
        return SimpleNamespace(hidden_states=(inputs_embeds, h), attentions=(w,) if output_attentions else None)


def test_llada_style_rotary_is_replaced_and_removed():
    torch.manual_seed(0)
    m = _LladaStandIn()
    bb = HFBackbone(m)
    assert bb.n_layers == 1 and bb.rotary_inv_freq().shape == (4,)
    ids = torch.randint(0, 30, (1, 12))
    with torch.no_grad():
        base = bb.logits(bb.states(ids).layer_states[-1])
        s = torch.tensor([1.0, 1.5, 2.0, 3.0])
        with rotary_scaled(bb, s):  # type: ignore[arg-type]
            sin, _ = m.rotary_emb.get_rotary_embedding(5, torch.device("cpu"))
            assert torch.allclose(sin[0, 0, 1, :4], torch.sin(bb._base * s))  # position 1: the scaled angles
            scaled = bb.logits(bb.states(ids).layer_states[-1])
        assert "get_rotary_embedding" not in m.rotary_emb.__dict__  # the replacement is gone
        after = bb.logits(bb.states(ids).layer_states[-1])
    assert not torch.allclose(base, scaled, atol=1e-4)
    assert torch.equal(base, after)


def test_a_model_without_rotary_is_refused():
    m = nn.Linear(2, 2)
    m.config = SimpleNamespace(num_hidden_layers=1, hidden_size=2, num_attention_heads=1)  # type: ignore[assignment]
    with pytest.raises(ValueError, match="no rotary module"):
        HFBackbone(m)
