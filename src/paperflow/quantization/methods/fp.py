"""FP: no weight quantization (the unquantized model is evaluated directly; no packed model dir)."""

from dataclasses import dataclass

from paperflow.quantization.methods import METHODS, Method


@dataclass(frozen=True)
class Options:
    pass


def quantize(model, ctx):
    return {}


METHODS.register("fp")(Method(quantize, Options, packs=False))
