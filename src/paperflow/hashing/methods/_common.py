"""Loss pieces several methods share (not a method: the leading underscore keeps it out of the enum)."""

from __future__ import annotations

from typing import Any

from paperflow.hashing.methods import Batch

# parameters of the supervised baselines' loss (prototype CE + unit-weight margin loss)
SUPERVISED_KEYS = {"ce_temp": "baselines.ce_temp", "gamma": "rfcmh.gamma", "weight_decay": "train.weight_decay"}


def supervised(b: Batch, eps: float = 0.0) -> Any:
    """`plain` [R]: CE (BCE multi-label) on prototype logits zW/T for both modalities, targets
    (1 − ε) y + ε/K, plus the margin loss with unit weights."""
    import torch

    from paperflow.hashing import model as M

    ones = torch.ones(b.z1.shape[0], device=b.z1.device)
    return (M.label_loss(b.z1, b.z2, b.W, b.y, b.mp["ce_temp"], b.multilabel, eps=eps)
            + M.margin(b.z1, b.z2, b.y, ones, b.mp["gamma"], b.multilabel, normalize="weights"))
