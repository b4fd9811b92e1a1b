"""Rotation-only baseline: a Kronecker input rotation of the KOTMS shape — (a) Haar-random factors
(QuaRot-like) or (b) the learned KOTMS factors — followed by RTN ternary or RTN W4."""

import torch

from paperflow.core.seeding import stream
from paperflow.quantization.e2m import rtn_int4, rtn_ternary
from paperflow.quantization.kotms import random_kron
from paperflow.quantization.methods import METHODS
from paperflow.quantization.qmodel import qlinears


@METHODS.register("rotation_only")
def quantize(model, ctx):
    rot = ctx.options.get("rotation", "random")
    weights = ctx.options.get("weights", "ternary")
    gen = torch.Generator().manual_seed(int(stream(ctx.seed, "rotation_only").integers(2**31)))
    records = {}
    for name, lin in qlinears(model).items():
        if rot == "random":
            C, B = random_kron(lin.weight, gen)
        elif rot == "kotms":
            C, B = ctx.kotms[name]
        else:
            raise ValueError(f"unknown rotation {rot!r}")
        lin.set_rotation(C, B)
        rec = rtn_ternary(lin.weight) if weights == "ternary" else rtn_int4(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records
