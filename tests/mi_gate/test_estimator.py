"""LSMI decomposition, the code's mean adjustment, the gate, the density model, cross-fitting."""

import numpy as np

from paperflow.mi_gate import estimator as E

rng = np.random.default_rng(0)


def test_decompose_identities():
    iv, it, ivt, hv, ht = (rng.normal(size=50) for _ in range(5))
    sc = E.decompose(iv, it, ivt, hv + 5, ht + 5)
    assert np.allclose(sc["r"] + sc["u_v"], iv) and np.allclose(sc["r"] + sc["u_t"], it)
    assert np.allclose(sc["r"] + sc["u_v"] + sc["u_t"] + sc["s"], ivt)
    # r = min(h) − min(h − i): with equal entropies h it is h − (h − max i) = max(i_V, i_T)
    sc2 = E.decompose(np.array([0.3]), np.array([0.5]), np.array([0.9]), np.array([2.0]), np.array([2.0]))
    assert np.isclose(sc2["r"][0], 0.5) and np.isclose(sc2["u_v"][0], -0.2) and np.isclose(sc2["u_t"][0], 0.0)
    # a much lower-entropy text side: r = h_T − min(h_V − i_V, h_T − i_T) = i_T
    sc3 = E.decompose(np.array([0.3]), np.array([0.5]), np.array([0.9]), np.array([9.0]), np.array([1.0]))
    assert np.isclose(sc3["r"][0], 0.5)


def _sc(r, uv, ut, s):
    return {"r": np.array(r, float), "u_v": np.array(uv, float), "u_t": np.array(ut, float), "s": np.array(s, float)}


def test_adjustment_branches_preserve_sums():
    cases = [(_sc([-1, 0], [1, 1], [2, 2], [0, 0]), 0.5),   # R̄ < 0 → δ = −min(R̄, S̄) = 0.5
             (_sc([1, 1], [-1, -0.5], [0, 1], [1, 1]), -0.75),  # Ū_V < 0 → δ = min(Ū_V, Ū_T)
             (_sc([1, 1], [1, 1], [1, 1], [1, 1]), 0.0)]
    for sc, want in cases:
        adj, d = E.adjust(sc)
        assert np.isclose(d, want)
        for a, b in (("r", "u_v"), ("r", "u_t")):
            assert np.allclose(adj[a] + adj[b], sc[a] + sc[b])
        tot = lambda x: sum(x[k] for k in E.TERMS)  # noqa: E731
        assert np.allclose(tot(adj), tot(sc))


def test_gate_takes_top_uv_among_valid_only():
    sc = _sc([0, 0, 0, 0, 0, 12], [1, 3, 2, 0, 0.5, 9], [0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0])
    # sample 5 has the largest u_V but R dominates it: not valid; sample 3 is U_T-dominant
    assert E.dominant(sc).tolist() == [1, 1, 1, 2, 1, 0]
    assert E.gate_select(sc, 0.5).tolist() == [1, 2]  # ⌊0.5·4⌋ = 2 of the valid set {0, 1, 2, 4}
    assert E.gate_select(sc, 1.0).tolist() == [0, 1, 2, 4]
    assert E.gate_select(sc, 0.2).size == 0
    assert E.crosstab(E.dominant(sc), np.array([0, 0, 1, 2, 3, 3])) == [[0, 2, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                                                                        [1, 1, 0, 0]]


def test_gmm_density_is_higher_on_the_data():
    x = np.concatenate([rng.normal(-3, 0.5, (300, 2)), rng.normal(3, 0.5, (300, 2))])
    g = E.fit_density(x, dict(pca_dim=2, gmm_components=4, gmm_iters=30, reg_covar=1e-3), 0)
    h_data = E.neg_log_density(g, x).mean()
    assert h_data < E.neg_log_density(g, np.zeros((10, 2))).mean()
    # the density is of the whitened PCA features: whitening happened, and no one component takes everything
    z = g[0].transform(x)
    assert np.allclose(z.std(0, ddof=1), 1.0, atol=1e-2)
    assert g[1].weights_.max() < 0.9


def test_folds_partition_and_crossfit_finds_image_unique():
    y = rng.integers(0, 2, 600)
    xv = (y[:, None] * 2.0 - 1) + 0.5 * rng.standard_normal((600, 8))  # the image determines y
    xt = rng.standard_normal((600, 8))  # the text is noise
    f = E.fold_ids(y, 2, 0)
    assert set(f) == {0, 1} and abs((f == 0).mean() - 0.5) < 0.01
    p = dict(hidden=16, lr=3e-3, max_epochs=15, patience=3, holdout=0.15, batch_size=64, pca_dim=4,
             gmm_components=4, gmm_iters=10, reg_covar=0.01, folds=2, seed=0)
    res = E.lsmi_crossfit(xv, xt, y, p, 0)
    assert res["pieces"]["i_v"].mean() > 0.5 and abs(res["pieces"]["i_t"].mean()) < 0.1
    assert E.dominance_shares(res["scores"])["u_v"] > 0.6
