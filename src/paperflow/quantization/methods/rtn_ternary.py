"""RTN ternary: BitNet b1.58 absmean rule per row, no calibration, no rotation."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method


@dataclass(frozen=True)
class Options:
    pass


def quantize(model, ctx):
    from paperflow.quantization.e2m import rtn_ternary
    from paperflow.quantization.qmodel import qlinears

    records = {}
    for name, lin in qlinears(model).items():
        rec = rtn_ternary(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records


METHODS.register("rtn_ternary")(Method(quantize, Options))
