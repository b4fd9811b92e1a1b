"""RTN W4 (per-output-channel symmetric absmax int4); activations are set at evaluation (A4)."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method


@dataclass(frozen=True)
class Options:
    pass


def quantize(model, ctx):
    from paperflow.quantization.e2m import rtn_int4
    from paperflow.quantization.qmodel import qlinears

    records = {}
    for name, lin in qlinears(model).items():
        rec = rtn_int4(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records


METHODS.register("rtn_w4")(Method(quantize, Options))
