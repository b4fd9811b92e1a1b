"""TWLA weights: KOTMS rotations, then E2M-ATQ (stage 1 + stage 2) with the GPTQ-style blockwise
error-compensation loop on rotated calibration inputs, layer by layer ("lite" grouping).
Ablations through options: stage2=false (E2M stage 1 only), gptq=false (no error feedback)."""

from paperflow.quantization.calibrate import sequential_quantize
from paperflow.quantization.e2m import e2m_gptq
from paperflow.quantization.methods import METHODS
from paperflow.quantization.qmodel import qlinears


@METHODS.register("twla")
def quantize(model, ctx):
    for name, lin in qlinears(model).items():
        C, B = ctx.kotms[name]
        lin.set_rotation(C, B)
    e2m = ctx.params["e2m"]
    stage2 = ctx.options.get("stage2", True)
    gptq = ctx.options.get("gptq", True)
    records = {}
    per_layer = ctx.log.setdefault("ternarize", {})

    def q(name, lin, H):
        log = {}
        rec = e2m_gptq(lin.weight, H, block=e2m["block"], damp=e2m["damp"], stage2=stage2, gptq=gptq,
                       iters=e2m["stage1_iters"], log=log)
        lin.weight = rec.dequant()
        records[name] = rec
        per_layer[name] = log

    sequential_quantize(model, ctx.calib, ctx.params["batch"], q)
    return records
