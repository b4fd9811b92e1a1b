"""`label_smooth` [R]: `plain` with targets (1 − ε) y + ε/K; ε is a candidate the selection rule picks
(every ε in `baselines.label_smooth_eps` is trained in the same job)."""

from __future__ import annotations

from typing import Any

from paperflow.hashing.methods import Batch, Method, register
from paperflow.hashing.methods._common import SUPERVISED_KEYS, supervised


def _loss(b: Batch) -> Any:
    return supervised(b, eps=float(b.cand["eps"]))


METHOD = register(Method("label_smooth", loss=_loss,
                         config_keys={**SUPERVISED_KEYS, "eps": "baselines.label_smooth_eps"},
                         candidates=lambda mp: [{"eps": float(e)} for e in mp["eps"]], role="baseline", order=2))
