import math

import numpy as np
import pytest

from paperflow.hydra_nav.evaluate import baseline_triggers, per_episode, stagnation_share, summarise
from paperflow.hydra_nav.report import boot, mean_diff, share_diff


def test_spl_and_sot_by_hand():
    cols = {"success": np.array([1.0, 1.0, 0.0]), "moves": np.array([10.0, 20.0, 5.0]),
            "decisions": np.array([11.0, 21.0, 6.0]), "slow_calls": np.array([0.0, 2.0, 1.0]),
            "stagnation_calls": np.array([0.0, 1.0, 1.0]), "geodesic": np.array([10.0, 10.0, 10.0])}
    pe = per_episode(cols, 20.0, move_cost=1.0, decision_cost=0.2)
    t_ref = 10 + 0.2 * 11
    assert np.allclose(pe["spl"], [1.0, 0.5, 0.0])
    assert np.allclose(pe["op_time"], [12.2, 20 + 4.2 + 40, 5 + 1.2 + 20])
    assert np.allclose(pe["sot"], [1.0, t_ref / 64.2, 0.0])
    s = summarise(pe)
    assert s["sr"] == pytest.approx(2 / 3) and s["stagnation_share"] == pytest.approx(2 / 3)
    assert math.isnan(stagnation_share(np.zeros(3), np.zeros(3)))


def test_sot_falls_with_the_slow_call_cost():
    cols = {"success": np.ones(2), "moves": np.array([10.0, 12.0]), "decisions": np.array([11.0, 13.0]),
            "slow_calls": np.array([1.0, 3.0]), "stagnation_calls": np.zeros(2), "geodesic": np.array([8.0, 8.0])}
    sots = [per_episode(cols, c, move_cost=1.0, decision_cost=0.2)["sot"].mean() for c in (0, 5, 20, 50)]
    assert all(a > b for a, b in zip(sots, sots[1:]))


def test_baseline_policies_from_config():
    cfg = {"policies": {"fast_only": True, "slow_every_step": False, "every_k": [5, 10], "heuristic": True},
           "controllers": {"stagnation_m": 4}}
    assert baseline_triggers(cfg) == {"fast_only": {"kind": "never"}, "every_5": {"kind": "every", "k": 5},
                                      "every_10": {"kind": "every", "k": 10},
                                      "heuristic": {"kind": "stagnation", "m": 4}}


def test_paired_bootstrap_ci_covers_the_shift_and_share_difference():
    rng = np.random.default_rng(0)
    b = rng.normal(size=(1, 200))
    a = np.stack([b[0] + 0.5 + 0.1 * rng.normal(size=200) for _ in range(3)])
    e = boot([a, b], mean_diff, 500, 0)
    assert e.lo < 0.5 < e.hi and e.hi - e.lo < 0.1 and e.n == 200  # pairing removes the house variance
    slow = np.full((1, 10), 2.0)
    assert share_diff(slow, slow / 2, slow, slow / 4) == pytest.approx([0.25])
    assert math.isnan(share_diff(slow * 0, slow * 0, slow, slow)[0])
