"""MMSA metric definitions (metricsTop.py conventions), on hand-computed examples."""

import numpy as np
import pytest

from paperflow.consmsa.metrics import mosi_regression, regression_metrics, sims_regression


def test_mosi_metrics_by_hand():
    t = np.array([-2.0, -0.4, 0.0, 0.6, 2.6])
    p = np.array([-1.6, 0.2, -0.3, 0.4, 3.4])
    m = mosi_regression(p, t)
    assert m["mae"] == pytest.approx(np.mean([0.4, 0.6, 0.3, 0.2, 0.8]))
    assert m["corr"] == pytest.approx(np.corrcoef(p, t)[0, 1])
    # has0: y >= 0 vs pred >= 0 → [T, F, F, T, T] correct = 3/5; non0 drops y = 0: [T, F, T, T] = 3/4
    assert m["acc2_has0"] == pytest.approx(0.6) and m["acc2_non0"] == pytest.approx(0.75)
    # acc7: round(clip(·, ±3)): p → [-2, 0, -0, 0, 3], t → [-2, -0, 0, 1, 3] → 4/5
    assert m["acc7"] == pytest.approx(0.8)
    # acc5: clip ±2: p → [-2, 0, 0, 0, 2], t → [-2, 0, 0, 1, 2] → 4/5
    assert m["acc5"] == pytest.approx(0.8)
    assert 0 <= m["f1_has0"] <= 1 and 0 <= m["f1_non0"] <= 1


def test_perfect_predictions_and_sims():
    t = np.linspace(-3, 3, 13)
    m = regression_metrics(t, t)
    assert m["mae"] == 0 and m["acc7"] == 1 and m["f1_has0"] == 1
    s = sims_regression(np.array([-0.8, -0.05, 0.05, 0.9]), np.array([-0.9, 0.0, 0.2, 0.5]))
    # 3 bins (-1,-0.1], (-0.1,0.1], (0.1,1]: p → [0,1,1,2], t → [0,1,2,2] → 3/4
    # 2 bins: p → [0,0,1,1], t → [0,0,1,1]
    assert s["acc3"] == pytest.approx(0.75) and s["acc2"] == 1.0
    with pytest.raises(ValueError):
        regression_metrics(t, t, "mosei2")
