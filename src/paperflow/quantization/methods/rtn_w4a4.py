"""RTN W4 (per-output-channel symmetric absmax int4); activations are set at evaluation (A4)."""

from paperflow.quantization.e2m import rtn_int4
from paperflow.quantization.methods import METHODS
from paperflow.quantization.qmodel import qlinears


@METHODS.register("rtn_w4")
def quantize(model, ctx):
    records = {}
    for name, lin in qlinears(model).items():
        rec = rtn_int4(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records
