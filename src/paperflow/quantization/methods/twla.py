"""TWLA weights: KOTMS rotations, then E2M-ATQ (stage 1 + stage 2) with the GPTQ-style blockwise
error-compensation loop on rotated calibration inputs, layer by layer ("lite" grouping).
Ablations through options: stage2=false (E2M stage 1 only), gptq=false (no error feedback)."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method


@dataclass(frozen=True)
class Options:
    stage2: bool = True  # E2M stage 2 (false: the stage-1-only ablation)
    gptq: bool = True  # GPTQ error feedback (false: the no-feedback ablation)


def quantize(model, ctx):
    from paperflow.quantization.calibrate import sequential_quantize
    from paperflow.quantization.e2m import e2m_gptq
    from paperflow.quantization.qmodel import qlinears

    for name, lin in qlinears(model).items():
        C, B = ctx.kotms[name]
        lin.set_rotation(C, B)
    e2m = ctx.params["e2m"]
    stage2, gptq = ctx.options["stage2"], ctx.options["gptq"]
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


METHODS.register("twla")(Method(quantize, Options, needs_kotms=lambda o: True))
