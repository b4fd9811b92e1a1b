"""A LAM whose latent carries nothing must measure as carrying nothing: z_q exact, projections exact."""

from types import SimpleNamespace

import numpy as np
import torch

from paperflow.robotics import mi
from paperflow.robotics.evaluate import _pca, latents, project
from paperflow.robotics.model import LAM, LAMConfig


def _one_code_lam() -> LAM:
    torch.manual_seed(0)
    model = LAM(LAMConfig(grid=4, d_model=32, n_heads=4, n_layers=1))
    with torch.no_grad():
        model.vq.codebook[1:] = 1e3  # every pre-quantisation latent (O(1)) is nearest to code 0
    return model.eval()


def _clips(n: int, seed: int = 0) -> tuple[SimpleNamespace, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    sp = SimpleNamespace(images=rng.integers(0, 256, (n + 3, 2, 64, 64, 3), dtype=np.uint8))
    return sp, {"i0": np.arange(n), "i1": np.arange(3, n + 3)}


def test_latents_are_the_code_vectors_themselves():
    model = _one_code_lam()
    sp, c = _clips(40)
    lat = latents(model, sp, c)
    assert (lat["codes"] == 0).all()
    want = model.vq.codebook[0].detach().double().repeat(model.cfg.n_queries).numpy()
    assert lat["z"].shape == (40, 2, want.size)
    # every clip, both views: exactly code 0's vector (h + sg(c - h) would differ by h-dependent rounding)
    assert np.array_equal(lat["z"], np.broadcast_to(want, lat["z"].shape))


def test_one_code_latent_has_zero_ksg_and_chance_probe():
    model = _one_code_lam()
    sp, c = _clips(300, seed=1)
    lat = latents(model, sp, c)
    z = lat["z"][:, 0]
    pca = _pca(z[:200], 16)
    Z = project(pca, z)
    assert np.ptp(Z, axis=0).max() == 0.0
    # an action that the row order predicts: any spread in Z that follows the row order would be "information"
    a = np.linspace(-1, 1, len(z))[:, None] + 0.01 * np.random.default_rng(2).standard_normal((len(z), 1))
    assert abs(mi.ksg_mi(Z, a, k=4)) < 1e-9
    pr = mi.ridge_probe(mi.standardize(z[:200], z[:200]), a[:200], np.arange(200) // 10,
                        {"test": (mi.standardize(z[200:], z[:200]), a[200:])})
    assert pr["test"]["nmse"] >= 1.0 - 1e-9  # a constant predictor: no better than the test mean


def test_project_maps_equal_rows_to_equal_rows():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((3, 12))
    x = base[rng.integers(0, 3, 500)]
    pca = _pca(x + 1e-3 * rng.standard_normal(x.shape), 4)
    Z = project(pca, x)
    assert len(np.unique(Z, axis=0)) == 3
    np.testing.assert_allclose(Z, pca.transform(x), atol=1e-10)
    assert project(pca, x[:0]).shape == (0, 4)


def test_per_dim_section_names_the_probed_axes():
    from paperflow.robotics.report import per_dim_section

    agg = {"mvp": {"probe_nmse_per_dim_slot0": {"mean": [0.9, 0.95, 0.43]}},
           "single": {"probe_nmse_per_dim_slot0": {"mean": [0.8, 1.04, 0.48]}}}
    text = per_dim_section(agg, [0, 1, 2])
    assert "| model | x | y | z |" in text and "| single | 0.800 | 1.040 | 0.480 |" in text
    assert per_dim_section(agg, [0, 1, 2, 5]) == ""  # dims do not match the runs: no table, not a wrong one
    assert per_dim_section({"mvp": {}}, [0, 1, 2]) == ""  # runs without the per-dim numbers
