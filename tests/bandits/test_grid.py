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


def test_plan_limits_an_algorithm_to_part_of_the_T_grid():
    from paperflow.bandits import plan
    from paperflow.core.config import validate_config

    cfg = validate_config({"bandits": {"enabled": True, "T": [1000, 10000, 100000], "seeds": 2,
                                       "regimes": {"r": {"K": 5, "d": 2}},
                                       "algorithms": {"blce": {}, "batch_elim_dg": {"T_min": 10000, "T_max": 10000}},
                                       "glm": {"enabled": False}, "budget": {"enabled": False}}})["bandits"]
    cells = plan.cells(cfg)
    assert sorted({c.T for c in cells if c.variant == "blce"}) == [1000, 10000, 100000]
    assert [(c.T, c.seed) for c in cells if c.variant == "batch_elim_dg"] == [(10000, 0), (10000, 1)]
    p = plan.job_params(cfg, "main", "r", "batch_elim_dg", 10000, 0)
    assert "T_min" not in p["algo_params"] and "T_max" not in p["algo_params"]
