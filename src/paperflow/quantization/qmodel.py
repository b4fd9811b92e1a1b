"""Fake-quantized model: every linear inside the decoder blocks becomes a `QLinear` holding an
optional Kronecker input rotation, a (dequantized) weight in the rotated basis and a per-token
activation quantizer. Embeddings, norms and lm_head stay FP (spec §1).

Device: each job makes one decision (`job_device()`: CUDA when torch sees a GPU, else CPU) and
loads the model there; every other tensor follows the model (`model_device`) or the tensor it is
computed from. On CPU nothing changes numerically. The CUDA path has not been run on a GPU here
(only CPU tests, plus tests that a second device is followed, using PyTorch's "meta" device)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from paperflow.quantization.ops import act_quant, rotate_in, rotate_weight

LINEAR_ORDER = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
                ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]
LINEARS = [n for g in LINEAR_ORDER for n in g]


class QLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.register_buffer("weight", weight.detach().clone().to(torch.float32))
        self.register_buffer("bias", None if bias is None else bias.detach().clone().to(torch.float32))
        # Kronecker factors: non-persistent buffers, so `model.to(device)` moves them with the weight
        # while state_dict() (and so the packed format, see store.py) does not contain them.
        self.register_buffer("C", None, persistent=False)
        self.register_buffer("B", None, persistent=False)
        self.act_bits = 16
        self.act_clip = 1.0
        self.input_hook = None  # callable(x_rotated) used by calibration / LAC

    @property
    def in_features(self) -> int:
        return self.weight.shape[1]

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def set_rotation(self, C: torch.Tensor, B: torch.Tensor) -> None:
        """Rotate the FP weight (W' = W Qᵀ) and the input at run time (x' = Q x): output unchanged.
        C and B (often CPU tensors read from kotms.safetensors) are moved to the weight's device."""
        if self.C is not None:
            raise RuntimeError("rotation already set")
        dev = self.weight.device
        self.C = C.to(device=dev, dtype=torch.float32).contiguous()
        self.B = B.to(device=dev, dtype=torch.float32).contiguous()
        self.weight = rotate_weight(self.weight, self.C, self.B)

    def rotate_input(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.C is None else rotate_in(x, self.C, self.B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.rotate_input(x)
        if self.input_hook is not None:
            self.input_hook(x)
        x = act_quant(x, self.act_bits, self.act_clip)
        return F.linear(x, self.weight, self.bias)


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    return model.model.layers


def wrap_linears(model: nn.Module) -> dict[str, QLinear]:
    """Replace each decoder-block linear by a QLinear (FP weights, no rotation yet). In place."""
    out = {}
    for i, layer in enumerate(decoder_layers(model)):
        for name in LINEARS:
            parent_name, attr = name.split(".")
            parent = getattr(layer, parent_name)
            lin = getattr(parent, attr)
            if not isinstance(lin, QLinear):
                lin = QLinear(lin.weight, lin.bias)
                setattr(parent, attr, lin)
            out[f"model.layers.{i}.{name}"] = lin
    return out


def qlinears(model: nn.Module) -> dict[str, QLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, QLinear)}


def iter_blocks(model: nn.Module) -> Iterator[tuple[int, dict[str, QLinear]]]:
    for i, layer in enumerate(decoder_layers(model)):
        yield i, {n: m for n, m in layer.named_modules() if isinstance(m, QLinear)}


def set_activation_bits(model: nn.Module, block_bits: list[int], clips: dict[str, dict[int, float]] | None = None,
                        default_clip: float = 0.9) -> None:
    """All linears of block i use block_bits[i]; clip from `clips[name][bits]` (LAC) or the default."""
    for i, lins in iter_blocks(model):
        for short, lin in lins.items():
            full = f"model.layers.{i}.{short}"
            b = int(block_bits[i])
            lin.act_bits = b
            lin.act_clip = 1.0 if b >= 16 else (clips[full][b] if clips and full in clips else default_clip)


def job_device() -> torch.device:
    """The job's one device decision: CUDA when available, else CPU (no dtype change: fp32 on both)."""
    from paperflow.core.accel import cuda_available

    return torch.device("cuda") if cuda_available() else torch.device("cpu")


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters live; inputs built next to the model go there."""
    return next(model.parameters()).device


def load_fp_model(model_dir: str, device: torch.device | str | None = None):
    """fp32 model from a save_pretrained dir, on `device` (None: where from_pretrained puts it, the CPU)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if device is not None:
        model.to(device)
    model.eval()
    return model
