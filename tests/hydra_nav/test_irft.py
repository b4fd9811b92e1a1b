import numpy as np

from paperflow.hydra_nav.agent import EpisodeResult
from paperflow.hydra_nav.env import HydraNavEnv
from paperflow.hydra_nav.irft import fit_logistic, keep_fastest, op_time, train_irft


def test_logistic_fit_learns_the_rule_and_the_prior_correction_restores_the_base_rate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 6))
    y = (x[:, 0] + 0.3 * rng.normal(size=4000) > 1.5).astype(float)  # rare positives (~7%)
    m = fit_logistic(x, y, l2=1e-4)
    assert np.argmax(np.abs(m.w)) == 0 and m.w[0] > 0
    assert abs(float(m.prob(x).mean()) - y.mean()) < 0.03
    raw = fit_logistic(x, y, l2=1e-4, prior_correction=False)  # balanced weights alone over-trigger
    assert float(raw.prob(x).mean()) > 1.5 * y.mean()
    noise = (rng.random(4000) < 0.1).astype(float)  # labels unrelated to the features
    assert abs(float(fit_logistic(x, noise, prior_correction=False).prob(x).mean()) - 0.5) < 0.05
    assert abs(float(fit_logistic(x, noise).prob(x).mean()) - noise.mean()) < 0.02
    one_class = fit_logistic(x[:50], np.zeros(50))
    assert float(one_class.prob(x).max()) < 0.5


def _res(i, success, moves, calls):
    return EpisodeResult(str(i), success, moves, moves + 1, calls, 0, 5, np.zeros((0, 6)), np.zeros(0, np.int8))


def test_keep_fastest_drops_failures_then_keeps_the_fastest_share():
    rs = [_res(0, False, 10, 0), _res(1, True, 50, 0), _res(2, True, 10, 3), _res(3, True, 20, 0), _res(4, True, 30, 0)]
    kept = keep_fastest(rs, 20.0, 0.5, move_cost=1.0, decision_cost=0.2)
    assert [r.episode_id for r in kept] == ["3", "4"]  # op times 24.2, 36.2 < 50+12.2=62.2 (2) and 60.2 (1)
    assert keep_fastest(rs[:1], 20.0, 0.5, move_cost=1.0, decision_cost=0.2) == []
    assert np.allclose(op_time(np.array([10]), np.array([11]), np.array([2]), 20, move_cost=1, decision_cost=0.2), 52.2)


def test_train_irft_runs_every_round_for_every_cost(small_dataset):
    env = HydraNavEnv(small_dataset, max_steps=80)
    p = {"episodes_per_round": 3, "rounds": 2, "lam": 8.0, "stagnation_m": 4, "move_cost": 1.0,
         "decision_cost": 0.2, "p0": 0.3, "keep_share": 0.5, "l2": 0.01, "prior_correction": True, "costs": [20.0, 50.0]}
    out = train_irft(env, p, 0)
    assert set(out["costs"]) == {"20", "50"}
    for res in out["costs"].values():
        assert len(res["rounds"]) == 2 and len(res["model"]["w"]) == 6
        assert res["rounds"][0]["episodes"] == 3
    # round 0 is shared by the costs
    assert out["costs"]["20"]["rounds"][0]["sr"] == out["costs"]["50"]["rounds"][0]["sr"]
