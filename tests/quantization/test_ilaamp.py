import numpy as np
import pytest

from paperflow.quantization.ilaamp import brute_force, chain_dp, objective


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("L", [1, 3, 5])
def test_chain_dp_matches_brute_force_and_respects_budget(seed, L):
    rng = np.random.default_rng(seed)
    bits = [2, 4, 6, 8]
    d = np.abs(rng.normal(size=(L, 4))) * np.array([3.0, 1.0, 0.3, 0.0])
    k = rng.normal(scale=0.3, size=(L, 4, 4))
    k[0] = 0
    for avg in (3, 4, 6):
        B = round(avg * L)
        assign, val = chain_dp(d, k, bits, B, 0.5)
        bf_assign, bf_val = brute_force(d, k, bits, B, 0.5)
        assert sum(assign) <= B
        assert val == pytest.approx(bf_val, abs=1e-12)
        assert objective([bits.index(b) for b in assign], d, k, 0.5) == pytest.approx(val, abs=1e-12)


def test_dp_uses_interaction_term():
    # two blocks, budget 8 (avg 4): delta prefers (2, 6) vs (6, 2) equally; kappa breaks the tie
    bits = [2, 4, 6, 8]
    d = np.array([[1.0, 0.5, 0.0, 0.0], [1.0, 0.5, 0.0, 0.0]])
    k = np.zeros((2, 4, 4))
    k[1, 0, 2] = 5.0  # (2, 6) is bad together
    assign, _ = chain_dp(d, k, bits, 8, 1.0)
    assert assign in ([6, 2], [4, 4])  # without kappa, (2, 6) would tie with these
    assert chain_dp(d, np.zeros((2, 4, 4)), bits, 8, 1.0)[1] == pytest.approx(1.0)


def test_infeasible_budget_raises():
    with pytest.raises(ValueError):
        chain_dp(np.zeros((3, 4)), np.zeros((3, 4, 4)), [2, 4, 6, 8], 5, 0.5)
