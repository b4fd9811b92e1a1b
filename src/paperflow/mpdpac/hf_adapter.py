"""`Backbone` for a Hugging Face–format model, so MPS and MRS run on LLaDA-V / LaViDa as they run on `TinyMDM`.

The fixes need five things from a model (`paperflow.mpdpac.model.Backbone`); here is how each maps onto an HF
model `m` (a `PreTrainedModel` whose forward takes `inputs_embeds` and returns `hidden_states`):

- `embedding_matrix()` → `m.get_input_embeddings().weight`.
- `states(ids, embed_override, output_attentions)` → one forward pass on `inputs_embeds` (the override, [D],
  replaces every position's embedding: the prior pass), `output_hidden_states=True`; `hidden_states[1:]` is
  LLaDA's convention (one state per block, the last one after the final norm — transformers' decoder models
  append the post-norm state last, checked in the tests by `logits(h_last) == m(...).logits`). Attention maps
  need `attn_implementation="eager"` when the model is loaded.
- `logits(h)` → `m.get_output_embeddings()(h)` (LLaDA's `ff_out`, or the tied embedding).
- `rotary_inv_freq()` / `set_rotary_inv_freq(f)` → the per-pair rotary frequencies. Two kinds of rotary module
  are handled: transformers' own (`LlamaRotaryEmbedding` and relatives: an `inv_freq` buffer read on every
  call), and LLaDA's remote-code `RotaryEmbedding` (no frequency buffer: `get_rotary_embedding(seq_len,
  device, ...)` rebuilds sin/cos from `rope_theta` and caches them). For the second kind the adapter replaces
  `get_rotary_embedding` on the instance with one that builds the tables from the scaled frequencies in
  LLaDA's layout (`[1, 1, T, head_dim]`, the angle table concatenated with itself) and removes the
  replacement when the frequencies are set back to the base ones.

What is tested (tests/mpdpac/test_hf_adapter.py): the contract on a randomly initialised tiny
`LlamaForCausalLM` built from a config (no download) — shapes, the override, logits, attention maps, that
scaling the frequencies changes the logits and setting them back restores them bit for bit, and a full
`decode` with MPS and MRS; and the LLaDA path on a stand-in module with LLaDA's rotary interface. The real
LLaDA-V / LaViDa checkpoints (remote code, 8B, bf16) were not loaded here: that run is for the cluster
(`config/paper.yaml: mpdpac.backbones`), and LLaDA-V's vision tower must be run first to give the visual
tokens' embeddings, which `states` would then take through an `inputs_embeds` prefix (not written).
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import Tensor, nn

from paperflow.mpdpac.model import States


def _head_dim(model: nn.Module) -> int:
    cfg = model.config
    hd = getattr(cfg, "head_dim", None)
    if hd:
        return int(hd)
    d = getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model")
    h = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads")
    return int(d) // int(h)


def _llada_style(mod: nn.Module) -> bool:
    return hasattr(mod, "rope_theta") and callable(getattr(mod, "get_rotary_embedding", None))


class HFBackbone:
    """Wrap an HF model as a `Backbone`. The model is put in eval mode; nothing is copied."""

    def __init__(self, model: nn.Module):
        self.model = model.eval()
        cfg = model.config
        n = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layers", None)
        if n is None:
            raise ValueError("the model's config names no layer count (num_hidden_layers / n_layers)")
        self.n_layers = int(n)
        self._hf_rotary = [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), Tensor)]
        self._llada_rotary = [m for m in model.modules() if _llada_style(m)]
        if not self._hf_rotary and not self._llada_rotary:
            raise ValueError(f"{type(model).__name__}: no rotary module found (neither an `inv_freq` buffer nor "
                             "LLaDA's `get_rotary_embedding`); MRS cannot be applied")
        hd = _head_dim(model)
        if self._hf_rotary:
            self._base = self._hf_rotary[0].inv_freq.detach().clone().float()
        else:
            theta = float(self._llada_rotary[0].rope_theta)
            self._base = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float) / hd))
        self._current = self._base.clone()

    # --- Backbone ---------------------------------------------------------------------------------------
    def embedding_matrix(self) -> Tensor:
        return self.model.get_input_embeddings().weight  # type: ignore[operator,no-any-return]

    def states(self, ids: Tensor, embed_override: Tensor | None = None, output_attentions: bool = False) -> States:
        emb = self.model.get_input_embeddings()(ids)  # type: ignore[operator]
        if embed_override is not None:
            emb = embed_override.to(emb.dtype).expand_as(emb).contiguous()
        out = self.model(inputs_embeds=emb, output_hidden_states=True, output_attentions=output_attentions,
                         use_cache=False)
        hs = list(out.hidden_states[1:])
        if len(hs) != self.n_layers:
            raise ValueError(f"expected {self.n_layers} hidden states after the embeddings, got {len(hs)}")
        att = list(out.attentions) if output_attentions and out.attentions is not None else None
        if output_attentions and (att is None or any(a is None for a in att)):
            raise ValueError("the model returned no attention maps: load it with attn_implementation='eager'")
        return States(hs, att)

    def logits(self, h: Tensor) -> Tensor:
        return self.model.get_output_embeddings()(h)  # type: ignore[operator,no-any-return]

    def rotary_inv_freq(self) -> Tensor:
        return self._current.clone()

    def set_rotary_inv_freq(self, f: Tensor) -> None:
        f = f.detach().float().cpu()
        if f.shape != self._base.shape:
            raise ValueError(f"frequencies of shape {tuple(f.shape)}; the model's rotary tables have "
                             f"{tuple(self._base.shape)}")
        self._current = f.clone()
        for m in self._hf_rotary:
            m.inv_freq = f.to(device=m.inv_freq.device, dtype=m.inv_freq.dtype)
        restore = bool(torch.equal(f, self._base))
        for m in self._llada_rotary:
            if restore:
                m.__dict__.pop("get_rotary_embedding", None)
            else:
                m.get_rotary_embedding = types.MethodType(_scaled_llada_tables(f), m)


def _scaled_llada_tables(inv_freq: Tensor) -> Any:
    """A replacement for LLaDA's `RotaryEmbedding.get_rotary_embedding` that builds (sin, cos), each
    [1, 1, seq_len, head_dim], from the given per-pair frequencies (LLaDA's own MRS arguments are ignored:
    the scaling is already in the frequencies)."""

    def get_rotary_embedding(self: nn.Module, seq_len: int, device: torch.device, *args: Any, **kwargs: Any
                             ) -> tuple[Tensor, Tensor]:
        with torch.autocast(torch.device(device).type, enabled=False):
            seq = torch.arange(seq_len, device=device, dtype=torch.float)
            freqs = torch.outer(seq, inv_freq.to(device))
            pos = torch.cat((freqs, freqs), dim=-1)
            return pos.sin()[None, None], pos.cos()[None, None]

    return get_rotary_embedding


def load_hf_backbone(path: str, dtype: str = "bfloat16", device: str = "cuda") -> HFBackbone:
    """Load a local HF-format checkpoint (LLaDA needs `trust_remote_code`) with eager attention (the
    attention-mass diagnostics read the maps). Local files only: nothing is downloaded."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, torch_dtype=getattr(torch, dtype), trust_remote_code=True,
                                      local_files_only=True, attn_implementation="eager")
    return HFBackbone(model.to(device))
