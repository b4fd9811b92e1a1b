"""Perplexity on fixed token windows: PPL = exp(mean next-token NLL). Windows (CPU) are moved to
the model's device batch by batch; the NLL sum is accumulated on the host (Python float)."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from paperflow.quantization.calibrate import capture_inputs, run_layer
from paperflow.quantization.qmodel import decoder_layers, model_device


@torch.no_grad()
def mean_nll(model, windows: torch.Tensor, batch: int = 8, per_window: list[float] | None = None) -> float:
    """Mean next-token NLL over all windows; with `per_window`, also append each window's own mean NLL
    (the paired unit of the report's claims; the overall mean is computed exactly as without it)."""
    tot, cnt = 0.0, 0
    dev = model_device(model)
    for s in range(0, windows.shape[0], batch):
        ids = windows[s:s + batch].to(dev)
        logits = model(ids, use_cache=False).logits[:, :-1].to(torch.float64)
        flat_ids = ids[:, 1:].reshape(-1)
        # cross_entropy(x, t) is nll_loss(log_softmax(x), t) in ATen; one log-softmax serves both reductions
        logp = F.log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)
        del logits
        nll = F.nll_loss(logp, flat_ids, reduction="sum")
        tot += float(nll)
        cnt += ids[:, 1:].numel()
        if per_window is not None:
            tok = F.nll_loss(logp, flat_ids, reduction="none").reshape(ids.shape[0], -1)
            per_window.extend(float(v) for v in tok.mean(dim=1).cpu())
    return tot / cnt


def perplexity(model, windows: torch.Tensor, batch: int = 8) -> dict:
    per: list[float] = []
    nll = mean_nll(model, windows, batch, per)
    return {"nll": nll, "ppl": math.exp(nll), "tokens": int(windows[:, 1:].numel()), "windows": int(windows.shape[0]),
            "window_nll": per}


@torch.no_grad()
def nll_from_layer(model, start: int, states, windows: torch.Tensor) -> float:
    """Mean NLL continuing the forward pass from cached inputs of decoder layer `start` (the cached
    hidden states may be kept on the host, see all_layer_inputs: they are moved to the model's device)."""
    layers = decoder_layers(model)
    dev = model_device(model)
    states = [(hs.to(dev), kw) for hs, kw in states]
    for layer in layers[start:]:
        states = run_layer(layer, states)
    tot, cnt, off = 0.0, 0, 0
    for hs, _ in states:
        ids = windows[off:off + hs.shape[0]].to(hs.device)
        off += hs.shape[0]
        logits = model.lm_head(model.model.norm(hs))[:, :-1].to(torch.float64)
        tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"))
        cnt += ids[:, 1:].numel()
    return tot / cnt


@torch.no_grad()
def run_block(model, i: int, states):
    """Decoder layer i on cached inputs (moved to the model's device): its outputs, as the input cache of layer i+1."""
    dev = model_device(model)
    return run_layer(decoder_layers(model)[i], [(hs.to(dev), kw) for hs, kw in states])


@torch.no_grad()
def all_layer_inputs(model, windows: torch.Tensor, batch: int, store_device: torch.device | str | None = None):
    """Cached inputs of every decoder layer under the model's current settings. Computed on the
    model's device; with `store_device` (e.g. "cpu") the cached hidden states are kept there
    instead (L copies of the activations: at LLaMA-2-7B scale, 32 sens windows, about 32 GiB in
    fp32, which need not fit next to the model on the GPU). The per-batch kwargs (position
    embeddings, masks) are shared by all layers and stay where the model made them."""
    states = capture_inputs(model, windows, batch)
    keep = (lambda st: st) if store_device is None else (lambda st: [(hs.to(store_device), kw) for hs, kw in st])
    out = [keep(states)]
    for layer in decoder_layers(model)[:-1]:
        states = run_layer(layer, states)
        out.append(keep(states))
    return out
