"""Bit packing (spec §8): ternary codes 2 bits/weight, int4 2/byte, bitmaps 8/byte."""

from __future__ import annotations

import torch

# 2-bit codes: 0b00 = 0, 0b01 = +1, 0b10 = -1, 0b11 invalid; first weight in the lowest bits.
_ENC = {0: 0, 1: 1, -1: 2}


def pack_ternary(t: torch.Tensor) -> torch.Tensor:
    """t int [m, n] in {-1,0,1} → uint8 [m, ceil(n/4)] (rows padded to a multiple of 4 with 0)."""
    if t.numel() and (t.abs() > 1).any():
        raise ValueError("ternary codes must be in {-1, 0, +1}")
    m, n = t.shape
    pad = (-n) % 4
    t = torch.nn.functional.pad(t.to(torch.int16), (0, pad))
    code = torch.where(t == -1, 2, t).to(torch.uint8)  # -1→2, 0→0, 1→1
    code = code.reshape(m, -1, 4)
    packed = code[..., 0] | (code[..., 1] << 2) | (code[..., 2] << 4) | (code[..., 3] << 6)
    return packed.contiguous()


def unpack_ternary(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of pack_ternary → int8 [m, n]. Rejects the invalid code 0b11."""
    p = packed.to(torch.uint8)
    codes = torch.stack([(p >> s) & 3 for s in (0, 2, 4, 6)], dim=-1).reshape(p.shape[0], -1)[:, :n]
    if (codes == 3).any():
        raise ValueError("invalid ternary code 0b11 in packed weights")
    return torch.where(codes == 2, -1, codes.to(torch.int16)).to(torch.int8)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """q int [m, n] in [-8, 7] → uint8 [m, ceil(n/2)] (offset-8 nibbles, first in the low nibble)."""
    if q.numel() and ((q < -8) | (q > 7)).any():
        raise ValueError("int4 values must be in [-8, 7]")
    m, n = q.shape
    u = torch.nn.functional.pad((q.to(torch.int16) + 8), (0, n % 2), value=8).to(torch.uint8).reshape(m, -1, 2)
    return (u[..., 0] | (u[..., 1] << 4)).contiguous()


def unpack_int4(packed: torch.Tensor, n: int) -> torch.Tensor:
    p = packed.to(torch.uint8)
    u = torch.stack([p & 15, p >> 4], dim=-1).reshape(p.shape[0], -1)[:, :n]
    return (u.to(torch.int16) - 8).to(torch.int8)
