"""The tiny masked-diffusion (LLaDA-style) backbone and the small interface the fixes are written against.

`Backbone` is everything MPS and MRS need from a model:
- `embedding_matrix()` — the token-embedding matrix E [V, D] (MPS: the mean row e);
- `states(ids, embed_override=None, output_attentions=False)` — one forward pass returning the per-layer
  states in LLaDA's convention (`layer_states[ℓ]`, ℓ = 0..n_layers−1: the outputs of blocks 0..n−2 and
  the *final-normed* output of the last block, i.e. the state read by the output projection), and the
  attention maps when asked; `embed_override` ([D]) replaces the input embedding of every position (the
  prior pass feeds e alone);
- `logits(h)` — the output projection applied to final states (after MPS edits them);
- `rotary_inv_freq()` / `set_rotary_inv_freq(f)` — the per-pair rotary frequencies (MRS rescales them).

`TinyMDM` implements it on `paperflow.nn.transformer` (bidirectional, RoPE): the override goes in through
its `steer` hook at layer 0, the frequencies through `model.rotary.inv_freq`. `hf_adapter.HFBackbone` implements the same five methods
for an HF-format masked-diffusion model (LLaDA-V / LaViDa, `config/paper.yaml`):
`model.get_input_embeddings().weight`; `model(inputs_embeds=..., output_hidden_states=True)` with
`hidden_states[1:]` (LLaDA appends the post-`ln_f` state last, the same convention); `ff_out` (or the
tied embedding) for `logits`; and the `rotary_emb` of every block for the frequencies (LLaDA builds its
sin/cos tables from `rope_theta` per call: the adapter rebuilds them from the scaled frequencies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from paperflow.nn.transformer import Transformer, TransformerConfig


@dataclass
class States:
    layer_states: list[Tensor]  # n_layers × [B, T, D]; the last one is final-normed (read by `logits`)
    attentions: list[Tensor] | None  # n_layers × [B, H, T, T] when asked


class Backbone(Protocol):
    n_layers: int

    def embedding_matrix(self) -> Tensor: ...

    def states(self, ids: Tensor, embed_override: Tensor | None = None, output_attentions: bool = False) -> States: ...

    def logits(self, h: Tensor) -> Tensor: ...

    def rotary_inv_freq(self) -> Tensor: ...

    def set_rotary_inv_freq(self, f: Tensor) -> None: ...


def model_config(vocab_size: int, p: Mapping[str, Any]) -> TransformerConfig:
    d_ff = p.get("d_ff")  # None: 4 × d_model
    return TransformerConfig(d_model=int(p["d_model"]), n_heads=int(p["n_heads"]), n_layers=int(p["n_layers"]),
                             d_ff=int(d_ff) if d_ff else None, vocab_size=vocab_size, out_dim=vocab_size,
                             causal=False, rope_base=float(p["rope_base"]), dropout=0.0)


class TinyMDM(nn.Module):
    """A bidirectional transformer predicting every position's token; MASK is token id 0."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.net = Transformer(cfg)
        self.n_layers = cfg.n_layers

    def forward(self, ids: Tensor) -> Tensor:
        return self.net(ids).logits  # type: ignore[return-value]

    # --- Backbone ---------------------------------------------------------------------------------------
    def embedding_matrix(self) -> Tensor:
        return self.net.embed.weight  # type: ignore[union-attr]

    def states(self, ids: Tensor, embed_override: Tensor | None = None, output_attentions: bool = False) -> States:
        steer = None
        if embed_override is not None:  # replace the input embedding: add (override − E[id]) at layer 0
            steer = {0: embed_override.to(self.embedding_matrix().dtype) - self.net.embed_inputs(ids)}
        out = self.net(ids, output_hidden_states=True, output_attentions=output_attentions, steer=steer)
        hs = list(out.hidden_states[1:-1]) + [out.last_hidden]  # type: ignore[index]
        return States(hs, list(out.attentions) if output_attentions else None)  # type: ignore[arg-type]

    def logits(self, h: Tensor) -> Tensor:
        return self.net.head(h)  # type: ignore[misc]

    def rotary_inv_freq(self) -> Tensor:
        return self.net.rotary.inv_freq

    def set_rotary_inv_freq(self, f: Tensor) -> None:
        self.net.rotary.inv_freq = f.to(self.net.rotary.inv_freq.dtype)


def build_inputs(visual: Tensor, answer_len: int, sep: int, mask: int, bg: int, visual_len: int | None = None
                 ) -> tuple[Tensor, int]:
    """`[BG padding; visual; SEP; MASK × answer_len]`. visual_len > grid²: BG tokens are prepended (the
    MRS arm's long visual prefix; the objects end up far from the answer). Returns (ids, answer start)."""
    B, G = visual.shape
    pad = max(0, (visual_len or G) - G)
    kw = {"dtype": torch.long, "device": visual.device}
    parts = [torch.full((B, pad), bg, **kw), visual.long(), torch.full((B, 1), sep, **kw),
             torch.full((B, answer_len), mask, **kw)]
    ids = torch.cat(parts, dim=1)
    return ids, pad + G + 1
