"""T5: off-policy f-TB training of a tabular model from a fixed full-support proposal recovers the target."""

from __future__ import annotations

import pytest

from paperflow.fdiv import identity as I
from paperflow.fdiv.losses import LOSSES

FTB = [n for n in LOSSES.names() if not LOSSES[n].learned_logz]


@pytest.mark.parametrize("proposal", ["uniform", "dirichlet"])
@pytest.mark.parametrize("loss", FTB)
def test_t5_offpolicy_tabular_recovers_target(loss, proposal):
    """Spec T5 allows 3000 Adam steps; 400 are enough (every f-TB loss ends below 1e-7), so the test uses
    the smaller, stricter budget (the identity stage runs the configured `offpolicy_steps`)."""
    assert I.t5_offpolicy(loss, proposal, steps=400, batch_size=256, lr=0.05, seed=0) < 1e-3


def test_t5_onpolicy_would_need_no_proposal_but_a_wrong_target_is_not_reached():
    """Sanity: the L1 measure is not trivially small — 10 steps from uniform are far from the target."""
    assert I.t5_offpolicy("rkl", "uniform", steps=10) > 0.1
