"""RTN ternary: BitNet b1.58 absmean rule per row, no calibration, no rotation."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method, round_each_linear


@dataclass(frozen=True)
class Options:
    pass


def quantize(model, ctx):
    from paperflow.quantization.e2m import rtn_ternary

    return round_each_linear(model, rtn_ternary)


METHODS.register("rtn_ternary")(Method(quantize, Options))
