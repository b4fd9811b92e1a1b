"""RTN W4 (per-output-channel symmetric absmax int4); activations are set at evaluation (A4)."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method, round_each_linear


@dataclass(frozen=True)
class Options:
    pass


def quantize(model, ctx):
    from paperflow.quantization.e2m import rtn_int4

    return round_each_linear(model, rtn_int4)


METHODS.register("rtn_w4")(Method(quantize, Options))
