from __future__ import annotations

import math

import pytest

from paperflow.bandits.grid import default_M, make_grid


@pytest.mark.parametrize("T", [16, 100, 257, 1000, 2000, 5000, 19999, 20000, 65536, 65537, 10**6, 2**32])
@pytest.mark.parametrize("kind", ["geometric", "sqrt"])
def test_grid_ends_exactly_at_T_and_increases(T, kind):
    g = make_grid(T, kind=kind)
    assert g[-1] == T
    assert all(a < b for a, b in zip(g, g[1:]))
    assert len(g) == default_M(T)


def test_spec_example_and_M_formula():
    assert make_grid(20000, 4) == [196, 2759, 10334, 20000]
    assert default_M(257) == 5 and default_M(65536) == 5 and default_M(65537) == 6 and default_M(2**32) == 6
    for T in (300, 5000, 10**5, 10**6):
        assert default_M(T) == math.ceil(math.log2(math.log2(T))) + 1
