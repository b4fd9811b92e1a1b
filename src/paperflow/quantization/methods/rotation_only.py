"""Rotation-only baseline: a Kronecker input rotation of the KOTMS shape — (a) Haar-random factors
(QuaRot-like) or (b) the learned KOTMS factors — followed by RTN ternary or RTN W4."""

from dataclasses import dataclass
from typing import Literal

from paperflow.quantization.methods import METHODS, Method


@dataclass(frozen=True)
class Options:
    rotation: Literal["random", "kotms"] = "random"
    weights: Literal["ternary", "w4"] = "ternary"


def quantize(model, ctx):
    import torch

    from paperflow.core.seeding import stream
    from paperflow.quantization.e2m import rtn_int4, rtn_ternary
    from paperflow.quantization.kotms import random_kron
    from paperflow.quantization.qmodel import qlinears

    rot, weights = ctx.options["rotation"], ctx.options["weights"]
    if rot not in ("random", "kotms") or weights not in ("ternary", "w4"):
        raise ValueError(f"rotation_only: unknown rotation {rot!r} or weights {weights!r}")
    gen = torch.Generator().manual_seed(int(stream(ctx.seed, "rotation_only").integers(2**31)))
    rtn = rtn_ternary if weights == "ternary" else rtn_int4
    records = {}
    for name, lin in qlinears(model).items():
        C, B = random_kron(lin.weight, gen) if rot == "random" else ctx.kotms[name]
        lin.set_rotation(C, B)
        rec = rtn(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records


METHODS.register("rotation_only")(Method(quantize, Options, needs_kotms=lambda o: o["rotation"] == "kotms"))
