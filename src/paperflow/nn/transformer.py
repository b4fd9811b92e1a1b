"""A small transformer shared by the studies: one readable file, nanoGPT style.

- pre-norm blocks: x + attn(norm(x)), then x + mlp(norm(x)); a final norm;
- rotary position embeddings (RoPE) on queries and keys, no absolute position embedding, so attention
  depends on positions only through their offsets. The tables come from `model.rotary.inv_freq` (a buffer)
  and `model.rotary.position_scale` (positions are divided by it) at every call, so rescaling either one
  (position interpolation, NTK-style base changes, a study's hook) changes the next forward;
- causal or bidirectional attention (`TransformerConfig.causal`), an optional padding mask;
- input: token ids (LongTensor [B, T], `vocab_size`) or continuous features (float [B, T, input_dim],
  a linear projection), or both configured and chosen by the input's dtype; optional output head;
- incremental decoding (causal only): `forward(x, kv_cache=cache, cache_start=s)` reads positions
  s..s+T-1, writes their keys and values into a `KVCache` (from `new_kv_cache`) and attends to the
  cached positions 0..s-1 as well; recomputing from s overwrites what was cached there, so a decoder may
  restart from any position whose prefix changed;
- hooks: `forward(x, output_hidden_states=True, output_attentions=True)` returns every layer's hidden
  state and attention map, and `steer={layer: vector}` adds a vector to a layer's hidden state
  (steering / suppression) before it flows on.

Hidden-state indexing (as in HF transformers): `hidden_states[0]` is the embedding output,
`hidden_states[i + 1]` the output of block i (before the final norm); `steer` uses the same indices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class TransformerConfig:
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int | None = None  # MLP width; default 4 * d_model
    vocab_size: int | None = None  # token-id input (nn.Embedding)
    input_dim: int | None = None  # continuous input (nn.Linear projection)
    out_dim: int | None = None  # output head width (e.g. vocab_size for a language model); None: no head
    tie_embeddings: bool = False  # head weight = token embedding (needs out_dim == vocab_size)
    causal: bool = True  # False: bidirectional (encoder)
    rope_base: float = 10000.0
    dropout: float = 0.0
    bias: bool = True
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model {self.d_model} must split into {self.n_heads} heads of even size (RoPE)")
        if self.vocab_size is None and self.input_dim is None:
            raise ValueError("give vocab_size (token input) and/or input_dim (continuous input)")
        if self.tie_embeddings and (self.vocab_size is None or self.out_dim != self.vocab_size):
            raise ValueError("tie_embeddings needs out_dim == vocab_size")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class TransformerOutput:
    last_hidden: Tensor  # [B, T, d_model], after the final norm
    logits: Tensor | None = None  # [B, T, out_dim] when the config has an output head
    hidden_states: tuple[Tensor, ...] | None = None  # n_layers + 1 entries of [B, T, d_model]
    attentions: tuple[Tensor, ...] | None = None  # n_layers entries of [B, n_heads, T, T], rows sum to 1


class KVCache:
    """Keys and values of every layer for positions 0..capacity-1 of B sequences ([B, H, capacity, hd] each,
    after RoPE). Filled by `Transformer.forward(..., kv_cache=, cache_start=)`."""

    def __init__(self, n_layers: int, batch: int, n_heads: int, capacity: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        shape = (batch, n_heads, capacity, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.capacity = capacity

    def layer(self, i: int) -> tuple[Tensor, Tensor]:
        return self.k[i], self.v[i]


class Rotary(nn.Module):
    """RoPE tables. `inv_freq` (buffer, [head_dim / 2]) and `position_scale` (float) are read at every
    call: rescale them in place (or override `tables`) to change the model's positional frequencies."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        self.register_buffer("inv_freq", base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.position_scale = 1.0

    def tables(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos, sin of shape [..., T, head_dim] for integer or real positions [..., T]."""
        dtype = torch.promote_types(self.inv_freq.dtype, torch.float32)  # never bf16 angles
        angles = (positions.to(dtype) / self.position_scale)[..., None] * self.inv_freq.to(dtype)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs (x_i, x_{i + d/2}) of the last dimension by the position's angles."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None,
                need_weights: bool, cache: tuple[Tensor, Tensor] | None = None,
                start: int = 0) -> tuple[Tensor, Tensor | None]:
        """mask: additive float mask broadcastable to [B, H, T, S] (0 = attend, very negative = blocked), S = T
        without a cache, start + T with one (`cache`: this layer's key and value buffers; x holds positions
        start..start+T-1, whose keys and values are written there)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            ck, cv = cache
            ck[:, :, start:start + T] = k
            cv[:, :, start:start + T] = v
            k, v = ck[:, :, :start + T], cv[:, :, :start + T]
        p_drop = self.dropout if self.training else 0.0
        if need_weights:  # explicit path: the attention map is returned
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            weights = scores.softmax(dim=-1)
            y = F.dropout(weights, p_drop, self.training) @ v
        else:
            weights = None
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
        return self.proj(y.transpose(1, 2).reshape(B, T, D)), weights


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d_ff = cfg.d_ff or 4 * cfg.d_model
        self.fc = nn.Linear(cfg.d_model, d_ff, bias=cfg.bias)
        self.proj = nn.Linear(d_ff, cfg.d_model, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.attn = Attention(cfg)
        self.norm2 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None,
                need_weights: bool = False, cache: tuple[Tensor, Tensor] | None = None,
                start: int = 0) -> tuple[Tensor, Tensor | None]:
        if cache is None:  # (attention replacements written for the plain call keep working)
            a, w = self.attn(self.norm1(x), cos, sin, mask, need_weights)
        else:
            a, w = self.attn(self.norm1(x), cos, sin, mask, need_weights, cache, start)
        x = x + self.drop(a)
        return x + self.drop(self.mlp(self.norm2(x))), w


class Transformer(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model) if cfg.vocab_size is not None else None
        self.in_proj = nn.Linear(cfg.input_dim, cfg.d_model, bias=cfg.bias) if cfg.input_dim is not None else None
        self.rotary = Rotary(cfg.head_dim, cfg.rope_base)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)
        self.head = nn.Linear(cfg.d_model, cfg.out_dim, bias=False) if cfg.out_dim is not None else None
        self.apply(self._init)
        for name, p in self.named_parameters():  # scaled init of the residual projections (GPT-2)
            if name.endswith("proj.weight") and not name.startswith("in_proj"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layers))
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight  # type: ignore[union-attr]

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def embed_inputs(self, x: Tensor) -> Tensor:
        """Token ids [B, T] → embedding; float features [B, T, input_dim] → projection."""
        if x.is_floating_point():
            if self.in_proj is None:
                raise ValueError("float input needs TransformerConfig.input_dim (continuous-input projection)")
            return self.in_proj(x)
        if self.embed is None:
            raise ValueError("token-id input needs TransformerConfig.vocab_size")
        return self.embed(x)

    def new_kv_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty key/value cache for incremental decoding of `batch` sequences of up to `capacity` tokens."""
        if not self.cfg.causal:
            raise ValueError("a key/value cache needs a causal model")
        p = next(self.parameters())
        return KVCache(self.cfg.n_layers, batch, self.cfg.n_heads, capacity, self.cfg.head_dim, p.dtype, p.device)

    def attention_mask(self, T: int, padding_mask: Tensor | None, dtype: torch.dtype,
                       device: torch.device, past: int = 0) -> Tensor | None:
        """Additive mask [B or 1, 1, T, past + T]: causal and/or blocking padded keys (padding_mask
        [B, past + T]: True/1 = real token); `past` cached positions come before the T queries. A padded query
        still attends (to the real keys), so no row is fully blocked unless a sequence has no real token before
        it in causal mode; its output is then meaningless, never NaN."""
        allowed = None
        if self.cfg.causal:
            allowed = torch.ones(T, past + T, dtype=torch.bool, device=device).tril(diagonal=past)[None, None]
        if padding_mask is not None:
            keys = padding_mask.to(torch.bool)[:, None, None, :]
            allowed = keys if allowed is None else allowed & keys
        if allowed is None:
            return None
        return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)

    def forward(self, x: Tensor, *, padding_mask: Tensor | None = None, positions: Tensor | None = None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                steer: Mapping[int, Tensor] | None = None, kv_cache: KVCache | None = None,
                cache_start: int = 0) -> TransformerOutput:
        """x: token ids [B, T] or features [B, T, input_dim]. positions: [T] or [B, T] (default 0..T-1, or
        cache_start..cache_start+T-1 with a cache).
        steer: {layer index i in 0..n_layers: vector [d_model] or [B, T, d_model]} added to hidden_states[i]
        (0 = the embedding output, i + 1 = the output of block i) before the next block reads it.
        kv_cache: x holds positions cache_start.. of the cached sequences; their keys and values are written
        to the cache and the queries also attend to cached positions 0..cache_start-1 (padding_mask then
        covers all cache_start + T keys; attention maps are [B, H, T, cache_start + T])."""
        h = self.drop(self.embed_inputs(x))
        B, T = h.shape[:2]
        past = 0
        if kv_cache is not None:
            if not self.cfg.causal:
                raise ValueError("a key/value cache needs a causal model")
            past = int(cache_start)
            if past < 0 or past + T > kv_cache.capacity:
                raise ValueError(f"positions {past}..{past + T - 1} outside the cache's {kv_cache.capacity}")
        if positions is None:
            positions = torch.arange(past, past + T, device=h.device)
        cos, sin = self.rotary.tables(positions)
        if cos.dim() == 3:  # per-sequence positions [B, T, hd] → broadcast over heads
            cos, sin = cos[:, None], sin[:, None]
        cos, sin = cos.to(h.dtype), sin.to(h.dtype)
        mask = self.attention_mask(T, padding_mask, h.dtype, h.device, past)
        steer = steer or {}
        if any(not 0 <= i <= len(self.blocks) for i in steer):
            raise ValueError(f"steer layers must be in 0..{len(self.blocks)}, got {sorted(steer)}")
        hidden: list[Tensor] = []
        attns: list[Tensor] = []
        for i in range(len(self.blocks) + 1):
            if i in steer:
                h = h + steer[i].to(h.dtype)
            if output_hidden_states:
                hidden.append(h)
            if i == len(self.blocks):
                break
            h, w = self.blocks[i](h, cos, sin, mask, output_attentions,
                                  kv_cache.layer(i) if kv_cache is not None else None, past)
            if output_attentions:
                attns.append(w)  # type: ignore[arg-type]
        out = self.norm(h)
        return TransformerOutput(out, self.head(out) if self.head is not None else None,
                                 tuple(hidden) if output_hidden_states else None,
                                 tuple(attns) if output_attentions else None)
