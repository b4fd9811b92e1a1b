"""Batched sampling from a shared prefix: each prompt is prefilled once, its KV cache is expanded to
n rows (`DynamicCache.batch_repeat_interleave`), and n continuations are decoded together.

`sample_one_at_a_time` is the naive baseline (one `generate` call per sample) used by
bench/unlearning_sampling.py. Decoding: temperature, then top-k, then top-p (HF order), then a draw
from a seeded `torch.Generator`; greedy = argmax. Generation stops at EOS (not included in output).

Devices: every tensor is created on the model's device (`model_device`), and the sampling generator
too (a CPU generator cannot drive `torch.multinomial` on CUDA). On the CPU this is the same stream as
before; on a GPU the draws come from a CUDA generator with the same seed, so GPU samples are
reproducible on the same hardware but are not the CPU samples (the logits differ in the last bits
anyway). Only the CPU path is exercised by the tests here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Decoder:
    name: str
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 50
    greedy: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> "Decoder":
        return cls(name=d["name"], temperature=d.get("temperature", 1.0), top_p=d.get("top_p", 1.0),
                   top_k=d.get("top_k", 50), greedy=d.get("greedy", False))


GREEDY = Decoder("greedy", greedy=True)


def _choose(logits, dec: Decoder, gen):
    import torch

    if dec.greedy:
        return logits.argmax(-1)
    logits = logits.float() / max(dec.temperature, 1e-6)
    if dec.top_k and dec.top_k > 0 and dec.top_k < logits.shape[-1]:
        kth = torch.topk(logits, dec.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if dec.top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, -1).cumsum(-1)
        remove = cum > dec.top_p
        remove[:, 1:] = remove[:, :-1].clone()  # keep the first token that crosses top_p
        remove[:, 0] = False
        logits = logits.masked_fill(remove.scatter(1, idx, remove), float("-inf"))
    probs = torch.softmax(logits, -1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


def left_pad(chunk: Sequence[Sequence[int]], pad_id: int, device=None):
    """(ids, attention mask, position ids) of left-padded prompts, each (P, L) long, on `device`."""
    import torch

    P, L = len(chunk), max(len(p) for p in chunk)
    ids = torch.full((P, L), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((P, L), dtype=torch.long, device=device)
    for i, p in enumerate(chunk):  # left padding
        ids[i, L - len(p):] = torch.tensor(list(p), dtype=torch.long, device=device)
        mask[i, L - len(p):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, pos


def _preallocate(cache, extra: int) -> None:
    """Give every layer of a `DynamicCache` room for `extra` more positions, written in place.

    HF's `DynamicLayer.update` appends by `torch.cat`, copying the whole cache at every decoding step
    (measured: the largest single cost of sampling n = 64 rows per prompt from the tiny model). Here each
    layer's keys/values move into a buffer of the final length; `update` writes the new position and
    returns the view of the filled part — the same values and shape as the concatenation, so the
    attention and every sampled token are unchanged (tested with `torch.equal` against the plain cache)."""
    import torch

    for layer in cache.layers:
        if not getattr(layer, "is_initialized", False) or layer.keys is None or layer.keys.numel() == 0:
            continue
        k, v = layer.keys, layer.values
        B, H, L, D = k.shape
        bk = torch.empty((B, H, L + extra, D), dtype=k.dtype, device=k.device)
        bv = torch.empty((B, H, L + extra, v.shape[-1]), dtype=v.dtype, device=v.device)
        bk[:, :, :L] = k
        bv[:, :, :L] = v
        layer.__class__ = _prealloc_layer_class()
        layer._bk, layer._bv, layer._len = bk, bv, L
        layer.keys, layer.values = bk[:, :, :L], bv[:, :, :L]


@lru_cache(maxsize=1)
def _prealloc_layer_class():
    """A `DynamicLayer` whose `update` writes into the buffer `_preallocate` gave it (built lazily:
    transformers is a heavy import)."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class PreallocLayer(DynamicLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            q = key_states.shape[-2]
            end = self._len + q
            if end > self._bk.shape[-2]:  # never with the sampler's own step count; fall back to growing
                self._bk = torch.cat([self._bk[:, :, :self._len], key_states], dim=-2)
                self._bv = torch.cat([self._bv[:, :, :self._len], value_states], dim=-2)
            else:
                self._bk[:, :, self._len:end] = key_states
                self._bv[:, :, self._len:end] = value_states
            self._len = end
            self.keys, self.values = self._bk[:, :, :end], self._bv[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._len

    return PreallocLayer


def _compact(cache, keep) -> None:
    """Keep only the batch rows `keep` (a sorted index tensor) of every layer of the KV cache, in place."""
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", False) or layer.keys is None or layer.keys.numel() == 0:
            continue
        if hasattr(layer, "_bk"):  # preallocated (in-place) layer
            layer._bk, layer._bv = layer._bk.index_select(0, keep), layer._bv.index_select(0, keep)
            layer.keys, layer.values = layer._bk[:, :, :layer._len], layer._bv[:, :, :layer._len]
        else:
            layer.keys, layer.values = layer.keys.index_select(0, keep), layer.values.index_select(0, keep)


def sample_shared_prefix(model, prompts: Sequence[Sequence[int]], n: int, dec: Decoder, max_new_tokens: int,
                         eos_id: int, pad_id: int, seed: int, prompts_per_batch: int = 8,
                         preallocate: bool = True, compact: bool = True) -> list[list[list[int]]]:
    """For each prompt, n continuations (token id lists, EOS stripped). Greedy ignores n beyond 1.
    `preallocate=False` keeps HF's concatenating cache (the reference the in-place cache is tested against).

    `compact` (issue 24): rows that emitted EOS are dropped from the model's forward pass (their KV cache
    rows are removed once at least 1/8 of the rows still computed have finished), instead of being decoded
    as padding until the last row of the batch ends. The draw is still made for every row of the batch
    (finished rows get a dummy distribution, their token is replaced by padding as before): the CPU
    `torch.multinomial` consumes the generator by the shape of its input, not its values, so every
    unfinished row gets the same random numbers as without compaction. `compact=False` is the reference
    it is tested against."""
    import torch

    from paperflow.unlearning.model import model_device

    if dec.greedy:
        n = 1
    dev = model_device(model)
    gen = torch.Generator(device=dev).manual_seed(int(seed))  # CPU: the same stream as torch.Generator()
    results: list[list[list[int]]] = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(prompts), prompts_per_batch):
            chunk = prompts[start: start + prompts_per_batch]
            P = len(chunk)
            ids, mask, pos = left_pad(chunk, pad_id, dev)
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1]
            if n > 1:  # the shared prefix: computed once, expanded to n rows
                cache.batch_repeat_interleave(n)
                logits = logits.repeat_interleave(n, 0)
                mask = mask.repeat_interleave(n, 0)
                pos = pos.repeat_interleave(n, 0)
            if preallocate:
                _preallocate(cache, max_new_tokens)
            L0 = mask.shape[1]
            mask_buf = torch.ones((mask.shape[0], L0 + max_new_tokens), dtype=mask.dtype, device=dev)
            mask_buf[:, :L0] = mask
            B = P * n
            next_pos = pos[:, -1:] + 1
            finished = torch.zeros(B, dtype=torch.bool, device=dev)
            rows = None  # batch rows still in the forward pass (None: all B)
            full_logits = None
            steps = []
            for _ in range(max_new_tokens):
                tok = _choose(logits, dec, gen)
                tok = torch.where(finished, torch.full_like(tok, pad_id), tok)
                steps.append(tok)
                finished |= tok == eos_id
                if bool(finished.all()):
                    break
                L = mask.shape[1] + 1
                if compact:
                    live = (~finished).nonzero().squeeze(-1) if rows is None else rows[~finished[rows]]
                    n_rows = B if rows is None else rows.numel()
                    if n_rows - live.numel() >= max(1, n_rows // 8):  # drop the finished rows from the cache
                        sel = live if rows is None else torch.searchsorted(rows, live)
                        _compact(cache, sel)
                        mask_buf, next_pos, rows = mask_buf.index_select(0, sel), next_pos.index_select(0, sel), live
                mask = mask_buf[:, :L]  # = cat(mask, ones) without the copy
                inp = tok[:, None] if rows is None else tok.index_select(0, rows)[:, None]
                out = model(input_ids=inp, attention_mask=mask, position_ids=next_pos,
                            past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                if rows is None:
                    logits = out.logits[:, -1]
                else:  # finished rows: a dummy (uniform) distribution; their draw is discarded
                    if full_logits is None:
                        full_logits = torch.zeros((B, out.logits.shape[-1]), dtype=out.logits.dtype, device=dev)
                    full_logits.zero_()
                    full_logits[rows] = out.logits[:, -1]
                    logits = full_logits
                next_pos = next_pos + 1
            gen_ids = torch.stack(steps, 1).cpu().tolist() if steps else [[] for _ in range(B)]
            for i in range(P):
                conts = []
                for j in range(n):
                    seq = gen_ids[i * n + j]
                    conts.append(seq[: seq.index(eos_id)] if eos_id in seq else seq)
                results.append(conts)
    return results


def sample_one_at_a_time(model, prompts: Sequence[Sequence[int]], n: int, dec: Decoder, max_new_tokens: int,
                         eos_id: int, pad_id: int, seed: int) -> list[list[list[int]]]:
    """Baseline: one HF `generate` call per sample (the prompt is prefilled n times)."""
    import torch

    from paperflow.unlearning.model import model_device

    torch.manual_seed(int(seed))  # seeds the CPU and every CUDA generator
    dev = model_device(model)
    results = []
    with torch.no_grad():
        for p in prompts:
            x = torch.tensor([list(p)], device=dev)
            conts = []
            for _ in range(1 if dec.greedy else n):
                out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=not dec.greedy,
                                     temperature=dec.temperature if not dec.greedy else None,
                                     top_p=dec.top_p if not dec.greedy else None,
                                     top_k=dec.top_k if not dec.greedy else None,
                                     max_new_tokens=max_new_tokens, pad_token_id=pad_id,
                                     # eos_id < 0: never stop early (benchmarks with a fixed amount of work)
                                     **({"eos_token_id": eos_id} if eos_id >= 0 else {"min_new_tokens": max_new_tokens}))
                seq = out[0, x.shape[1]:].cpu().tolist()
                conts.append(seq[: seq.index(eos_id)] if eos_id in seq else seq)
            results.append(conts)
    return results
