"""The round-to-nearest methods replace every quantised linear by its rounded weights and return the records."""

from __future__ import annotations

import torch

from paperflow.quantization.e2m import rtn_int4, rtn_ternary
from paperflow.quantization.methods import METHODS
from paperflow.quantization.qmodel import QLinear


def test_rtn_methods_round_every_linear():
    g = torch.Generator().manual_seed(0)
    for name, rounder in (("rtn_w4", rtn_int4), ("rtn_ternary", rtn_ternary)):
        W1, W2 = torch.randn(6, 8, generator=g), torch.randn(4, 6, generator=g)
        model = torch.nn.Sequential(QLinear(W1), torch.nn.ReLU(), QLinear(W2))
        records = METHODS[name].quantize(model, None)
        assert sorted(records) == ["0", "2"]
        assert torch.equal(model[0].weight, rounder(W1).dequant()) and torch.equal(model[2].weight, rounder(W2).dequant())
        assert not torch.equal(model[0].weight, W1)
