"""Perplexity on fixed token windows: PPL = exp(mean next-token NLL)."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from paperflow.quantization.calibrate import capture_inputs, run_layer
from paperflow.quantization.qmodel import decoder_layers


@torch.no_grad()
def mean_nll(model, windows: torch.Tensor, batch: int = 8) -> float:
    tot, cnt = 0.0, 0
    for s in range(0, windows.shape[0], batch):
        ids = windows[s:s + batch]
        logits = model(ids, use_cache=False).logits[:, :-1].to(torch.float64)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum")
        tot += float(nll)
        cnt += ids[:, 1:].numel()
    return tot / cnt


def perplexity(model, windows: torch.Tensor, batch: int = 8) -> dict:
    nll = mean_nll(model, windows, batch)
    return {"nll": nll, "ppl": math.exp(nll), "tokens": int(windows[:, 1:].numel()), "windows": int(windows.shape[0])}


@torch.no_grad()
def nll_from_layer(model, start: int, states, windows: torch.Tensor) -> float:
    """Mean NLL continuing the forward pass from cached inputs of decoder layer `start`."""
    layers = decoder_layers(model)
    for layer in layers[start:]:
        states = run_layer(layer, states)
    tot, cnt, off = 0.0, 0, 0
    for hs, _ in states:
        ids = windows[off:off + hs.shape[0]]
        off += hs.shape[0]
        logits = model.lm_head(model.model.norm(hs))[:, :-1].to(torch.float64)
        tot += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"))
        cnt += ids[:, 1:].numel()
    return tot / cnt


@torch.no_grad()
def all_layer_inputs(model, windows: torch.Tensor, batch: int):
    """Cached inputs of every decoder layer under the model's current settings."""
    states = capture_inputs(model, windows, batch)
    out = [states]
    for layer in decoder_layers(model)[:-1]:
        states = run_layer(layer, states)
        out.append(states)
    return out
