"""Packed quantized-model directory (spec §8) and its loader.

Layout of a quantized model dir:
  config.json, tokenizer files      copied from the base model dir
  quantized.safetensors             fp.<param>            FP params outside the decoder linears (fp32)
                                    <linear>.codes        uint8 [m, ceil(n/4)]  ternary, 2 bits/weight
                                    <linear>.mu/.alpha    fp16 [m, n_blocks]    per-row, per-block offset/scale
                                    <linear>.q4           uint8 [m, ceil(n/2)]  int4 (offset 8), 2/byte
                                    <linear>.scale        fp16 [m]
                                    <linear>.weight       fp32 [m, n]           (kind "fp")
                                    <linear>.rot_l/.rot_r fp32 [l,l], [r,r]     Kronecker input rotation
                                    <linear>.bias         fp32 (if any)
  quant.json                        format version, method, per-linear kind/shape/block/(l, r)
  memory.json                       bytes per component as written, file size, true bits/weight (spec §7)
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from paperflow.core.checkpoint import save_safetensors
from paperflow.quantization.e2m import Int4Layer, TernaryLayer
from paperflow.quantization.pack import pack_int4, pack_ternary, unpack_int4, unpack_ternary
from paperflow.quantization.qmodel import QLinear, load_fp_model, qlinears, wrap_linears

FORMAT_VERSION = 1
_COPY = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "chat_template.jinja")


def save_quantized(out_dir: str | Path, model, records: dict, base_dir: str | Path, method: str) -> dict:
    """Write the packed dir. `records[name]` is a TernaryLayer, Int4Layer or None (FP weight).
    Returns memory.json's content. The model and records may live on any device: everything is
    moved to the CPU here, before packing (packing and the file format are CPU-only)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for f in _COPY:
        if (Path(base_dir) / f).is_file():
            shutil.copy(Path(base_dir) / f, out / f)
    qls = qlinears(model)
    tensors: dict[str, torch.Tensor] = {}
    layers = {}
    skip = {f"{n}.{b}" for n in qls for b in ("weight", "bias")}
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    for k, v in model.state_dict().items():
        if k in skip or (tied and k == "lm_head.weight"):
            continue
        tensors[f"fp.{k}"] = v.detach().cpu().to(torch.float32).contiguous()
    comp = {"codes": 0, "params": 0, "rotations": 0, "fp_linear": 0, "bias": 0}
    n_lin = 0
    for name, lin in qls.items():
        rec = records.get(name)
        m, n = lin.weight.shape
        n_lin += m * n
        info = {"shape": [m, n]}
        if isinstance(rec, TernaryLayer):
            info.update(kind="ternary", block=rec.block)
            tensors[f"{name}.codes"] = pack_ternary(rec.t.cpu())
            tensors[f"{name}.mu"] = rec.mu.cpu().to(torch.float16).contiguous()
            tensors[f"{name}.alpha"] = rec.alpha.cpu().to(torch.float16).contiguous()
            comp["codes"] += _nbytes(tensors[f"{name}.codes"])
            comp["params"] += _nbytes(tensors[f"{name}.mu"]) + _nbytes(tensors[f"{name}.alpha"])
        elif isinstance(rec, Int4Layer):
            info.update(kind="int4")
            tensors[f"{name}.q4"] = pack_int4(rec.q.cpu())
            tensors[f"{name}.scale"] = rec.scale.cpu().to(torch.float16).contiguous()
            comp["codes"] += _nbytes(tensors[f"{name}.q4"])
            comp["params"] += _nbytes(tensors[f"{name}.scale"])
        else:
            info.update(kind="fp")
            tensors[f"{name}.weight"] = lin.weight.detach().cpu().contiguous()
            comp["fp_linear"] += _nbytes(tensors[f"{name}.weight"])
        if lin.C is not None:
            tensors[f"{name}.rot_l"] = lin.C.cpu().contiguous()
            tensors[f"{name}.rot_r"] = lin.B.cpu().contiguous()
            info["l"], info["r"] = lin.C.shape[0], lin.B.shape[0]
            comp["rotations"] += _nbytes(tensors[f"{name}.rot_l"]) + _nbytes(tensors[f"{name}.rot_r"])
        if lin.bias is not None:
            tensors[f"{name}.bias"] = lin.bias.cpu().contiguous()
            comp["bias"] += _nbytes(tensors[f"{name}.bias"])
        layers[name] = info
    save_safetensors(tensors, out / "quantized.safetensors", {"format": "paperflow-quant", "version": str(FORMAT_VERSION)})
    file_bytes = (out / "quantized.safetensors").stat().st_size
    meta = {"format_version": FORMAT_VERSION, "method": method, "base_model": str(base_dir), "layers": layers}
    (out / "quant.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    mem = memory_report(tensors, comp, n_lin, records, file_bytes)
    (out / "memory.json").write_text(json.dumps(mem, indent=1, sort_keys=True) + "\n")
    return mem


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def memory_report(tensors: dict, comp: dict, n_lin: int, records: dict, file_bytes: int) -> dict:
    """memory.json: bytes per component *as written* (each tensor's dtype in the file), the file's size
    (tensors + safetensors header), true bits/weight of the linears and of the whole stored file, and
    the unquantized model's fp32/fp16 sizes for reference."""
    fp_params = sum(v.numel() for k, v in tensors.items() if k.startswith("fp."))
    fp_bytes = sum(_nbytes(v) for k, v in tensors.items() if k.startswith("fp."))
    lin_bytes = comp["codes"] + comp["params"] + comp["rotations"] + comp["fp_linear"] + comp["bias"]
    total_params = fp_params + n_lin
    ter = [r for r in records.values() if isinstance(r, TernaryLayer)]
    ent = None
    if ter:
        counts = torch.zeros(3, dtype=torch.float64)
        for r in ter:
            counts += torch.bincount((r.t.cpu().flatten().to(torch.int64) + 1), minlength=3).to(torch.float64)
        p = counts / counts.sum()
        ent = float(-(p[p > 0] * p[p > 0].log2()).sum())
    out = {
        "bytes": {**comp, "fp_other": fp_bytes},
        "fp_other_dtypes": sorted({str(v.dtype).removeprefix("torch.") for k, v in tensors.items() if k.startswith("fp.")}),
        "n_linear_weights": n_lin,
        "n_other_params": fp_params,
        "bpw_linear": 8 * lin_bytes / n_lin,
        "bpw_linear_label": "codes + fp16 params + rotations (+ fp linears, bias) / linear weights",
        "tensor_bytes": lin_bytes + fp_bytes,
        "file_bytes": file_bytes,
        "bpw_model": 8 * file_bytes / total_params,
        "bpw_model_label": "quantized.safetensors as written (incl. header, FP params as stored) / all parameters",
        "total_bytes_fp32": 4 * total_params,
        "total_bytes_fp16": 2 * total_params,
    }
    if ter:
        n_ter = sum(r.t.numel() for r in ter)
        out["bpw_linear_entropy_bound"] = (8 * lin_bytes - 2 * n_ter + math.log2(3) * n_ter) / n_lin
        out["ternary_code_entropy_bits"] = ent
        out["ternary_code_fraction"] = {"-1": float(p[0]), "0": float(p[1]), "+1": float(p[2])}
    return out


def _skeleton(auto_cls, cfg, init_weights: bool):
    """The model built from its config. Without `init_weights` the random initialisation is skipped
    (transformers' `no_init_weights`; ≈ 2 s of a 135M model on one core): every parameter is then
    overwritten by `load_quantized`, which checks that none was left out."""
    if init_weights:
        return auto_cls.from_config(cfg, dtype=torch.float32)
    from transformers.initialization import no_init_weights

    with no_init_weights():
        return auto_cls.from_config(cfg, dtype=torch.float32)


def load_quantized(qdir: str | Path, device: torch.device | str | None = None, init_weights: bool = False):
    """Rebuild the fake-quant model from a packed dir (weights only; activation bits are set later).
    Unpacking and dequantization run on the CPU; the finished model (rotations included, they are
    QLinear buffers) is then moved to `device` (None: stays on the CPU). Every parameter comes from
    the packed dir, so the skeleton is not randomly initialised (`init_weights=True` does, for tests)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    qdir = Path(qdir)
    meta = json.loads((qdir / "quant.json").read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{qdir}/quant.json: unsupported format_version {meta.get('format_version')}")
    tensors = load_file(str(qdir / "quantized.safetensors"))
    cfg = AutoConfig.from_pretrained(qdir)
    model = _skeleton(AutoModelForCausalLM, cfg, init_weights)
    model.eval()
    wrap_linears(model)
    fp = {k[3:]: v for k, v in tensors.items() if k.startswith("fp.")}
    missing, unexpected = model.load_state_dict(fp, strict=False)
    qls = qlinears(model)
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    bad = [k for k in missing if not any(k.startswith(q + ".") for q in qls) and not (tied and k == "lm_head.weight")]
    unpacked = sorted(set(qls) - set(meta["layers"]))
    if bad or unexpected or unpacked:
        raise ValueError(f"{qdir}: state mismatch, missing {bad[:5]}, unexpected {unexpected[:5]}, "
                         f"linears not in quant.json {unpacked[:5]}")
    if tied:
        model.tie_weights()
    for name, info in meta["layers"].items():
        lin: QLinear = qls[name]
        m, n = info["shape"]
        if info["kind"] == "ternary":
            from paperflow.quantization.ops import ternary_dequant

            t = unpack_ternary(tensors[f"{name}.codes"], n)
            W = ternary_dequant(t, tensors[f"{name}.mu"], tensors[f"{name}.alpha"], info["block"])
        elif info["kind"] == "int4":
            from paperflow.quantization.ops import int4_dequant

            W = int4_dequant(unpack_int4(tensors[f"{name}.q4"], n), tensors[f"{name}.scale"])
        else:
            W = tensors[f"{name}.weight"]
        if W.shape != (m, n):
            raise ValueError(f"{qdir}: {name} has shape {tuple(W.shape)}, quant.json says {(m, n)}")
        lin.weight = W
        if f"{name}.rot_l" in tensors:
            lin.C, lin.B = tensors[f"{name}.rot_l"], tensors[f"{name}.rot_r"]
        if f"{name}.bias" in tensors:
            lin.bias = tensors[f"{name}.bias"]
    if device is not None:
        model.to(device)
    return model, meta


def fp_model_wrapped(model_dir: str | Path, device: torch.device | str | None = None):
    model = load_fp_model(str(model_dir), device)
    wrap_linears(model)
    return model
