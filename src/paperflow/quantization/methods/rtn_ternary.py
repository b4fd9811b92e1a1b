"""RTN ternary: BitNet b1.58 absmean rule per row, no calibration, no rotation."""

from paperflow.quantization.e2m import rtn_ternary
from paperflow.quantization.methods import METHODS
from paperflow.quantization.qmodel import qlinears


@METHODS.register("rtn_ternary")
def quantize(model, ctx):
    records = {}
    for name, lin in qlinears(model).items():
        rec = rtn_ternary(lin.weight)
        lin.weight = rec.dequant()
        records[name] = rec
    return records
