"""Layer-by-layer calibration driver: captures decoder-block inputs, accumulates H = mean x xᵀ of
each linear's (rotated) input, quantizes in the order {q,k,v} → o → {gate,up} → down and
re-propagates through the already-quantized sublayers (spec §3).

Device: token windows (CPU) are moved batch by batch to the model's device; captured states, the
float64 H accumulators and H itself live on the device of the layer being calibrated."""

from __future__ import annotations

from collections.abc import Callable

import torch

from paperflow.core.progress import progress
from paperflow.quantization.qmodel import LINEAR_ORDER, QLinear, decoder_layers, model_device


class _Stop(Exception):
    pass


def _layer_out(out):
    return out[0] if isinstance(out, tuple) else out


@torch.no_grad()
def capture_inputs(model, windows: torch.Tensor, batch: int, layer_idx: int = 0) -> list[tuple[torch.Tensor, dict]]:
    """[(hidden_states, kwargs)] per batch at the input of decoder layer `layer_idx` (on the model's device)."""
    layer = decoder_layers(model)[layer_idx]
    dev = model_device(model)
    store: list = []

    def pre(mod, args, kwargs):
        hs = args[0] if args else kwargs["hidden_states"]
        kw = {k: v for k, v in kwargs.items() if k != "hidden_states"}
        store.append((hs.detach(), kw))
        raise _Stop

    h = layer.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        for s in range(0, windows.shape[0], batch):
            try:
                model(windows[s:s + batch].to(dev), use_cache=False)
            except _Stop:
                pass
    finally:
        h.remove()
    return store


@torch.no_grad()
def run_layer(layer, states):
    return [(_layer_out(layer(hs, **kw)), kw) for hs, kw in states]


@torch.no_grad()
def sequential_quantize(model, windows: torch.Tensor, batch: int,
                        quantize: Callable[[str, QLinear, torch.Tensor], None]) -> None:
    """For each block and each group in LINEAR_ORDER: H ← mean x xᵀ over calibration tokens of the
    linear's rotated input (float64, streamed), then `quantize(full_name, qlinear, H)`, which must
    replace qlinear.weight. Inputs of later groups/blocks see the quantized weights."""
    states = capture_inputs(model, windows, batch)
    layers = decoder_layers(model)
    for i in progress(range(len(layers)), desc="calibrate"):
        layer = layers[i]
        mods = {n: m for n, m in layer.named_modules() if isinstance(m, QLinear)}
        for group in LINEAR_ORDER:
            acc = {s: [torch.zeros(mods[s].in_features, mods[s].in_features, dtype=torch.float64,
                                   device=mods[s].weight.device), 0] for s in group}

            def make_hook(s, last):
                def hook(x):
                    x2 = x.reshape(-1, x.shape[-1]).to(torch.float64)
                    acc[s][0] += x2.T @ x2
                    acc[s][1] += x2.shape[0]
                    if last:
                        raise _Stop
                return hook

            for j, s in enumerate(group):
                mods[s].input_hook = make_hook(s, j == len(group) - 1)
            try:
                for hs, kw in states:
                    try:
                        layer(hs, **kw)
                    except _Stop:
                        pass
            finally:
                for s in group:
                    mods[s].input_hook = None
            for s in group:
                H = acc[s][0] / max(1, acc[s][1])
                quantize(f"model.layers.{i}.{s}", mods[s], H)
        states = run_layer(layer, states)
