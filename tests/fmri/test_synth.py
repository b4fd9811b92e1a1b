"""Synthetic BOLD generator: determinism, balanced labels, recoverable task maps through the operator."""

import nibabel as nib
import numpy as np
import pytest

from paperflow.fmri import geometry as g
from paperflow.fmri import synth

CFG = dict(design_seed=0, delta=0.08, coupling_jitter=0.15, jitter_deg=4.0, network_amp=1.0, a_task=0.5,
           blocks_per_condition=1, noise_sd=1.0, ar_amp=0.3, drift_amp=0.3)


@pytest.fixture(scope="module")
def vol8(fs5, grid8):
    aff, shape, brain = grid8
    return aff, shape, brain, g.volume_to_vertices(fs5, aff, shape)


def test_same_seed_identical_outputs_and_balanced_labels(fs5, vol8, tmp_path):
    aff, shape, brain, A = vol8
    outs = []
    for k in range(2):
        d = tmp_path / f"r{k}"
        synth.generate_cohort(d, "trait", 6, 1, 30.0, 3, CFG, fs5, A, aff, shape, brain)
        outs.append(d)
    files = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
    assert any(str(f).endswith("_bold.nii.gz") for f in files) and (outs[0] / "participants.tsv").exists()
    for f in files:
        if f.name.endswith(".nii.gz"):
            a, b = (np.asarray(nib.load(o / f).dataobj) for o in outs)
            assert np.array_equal(a, b)
            assert nib.load(outs[0] / f).header.get_data_dtype() == np.int16
        elif f.suffix in (".tsv",):
            assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes()
        elif f.suffix == ".npz":
            za, zb = np.load(outs[0] / f), np.load(outs[1] / f)
            assert all(np.array_equal(za[k], zb[k]) for k in za.files)
    other = tmp_path / "other"
    synth.generate_cohort(other, "trait", 6, 1, 30.0, 4, CFG, fs5, A, aff, shape, brain)
    nii = next(f for f in files if f.name.endswith(".nii.gz"))
    assert not np.array_equal(np.asarray(nib.load(outs[0] / nii).dataobj), np.asarray(nib.load(other / nii).dataobj))
    parts = synth.read_participants(outs[0] / "participants.tsv")
    assert sum(p["trait_group"] for p in parts) == 3  # balanced
    assert sorted(p["site"] for p in parts) == [0, 0, 1, 1, 2, 2]  # balanced sites
    for p in parts:  # TR in the header = the site's TR
        sid = p["participant_id"]
        img = nib.load(next((outs[0] / sid / "func").glob("*_bold.nii.gz")))
        assert img.header.get_zooms()[3] == pytest.approx(p["tr"])


def test_trait_group_shifts_coupling():
    rs = {0: [], 1: []}
    class T:  # minimal template stand-in
        R0 = np.eye(8)
        mu = synth._unit(np.random.default_rng(0).standard_normal((8, 3, 3)))
        age_dir = synth._unit(np.ones(3))
        def field(self, mus, kappa, weights=None):
            return np.zeros(10)
    for s in range(40):
        y = s % 2
        d = synth.subject_design(T(), np.random.default_rng(s), y, 0.5, CFG)
        rs[y].append(d["R"][0, 1])
    assert np.mean(rs[1]) - np.mean(rs[0]) > 0.08  # 2 delta = 0.16 before the nuisance jitter


def test_task_maps_recovered_by_glm_through_the_operator(fs5, vol8, tmp_path):
    """Networks and noise off: GLM betas of the flat data on the true regressors reproduce
    M . Paint . g_c (r > 0.999)."""
    from paperflow.fmri.inputs import read_nifti

    aff, shape, brain, A = vol8
    cfg = {**CFG, "network_amp": 0.0, "noise_sd": 0.0, "ar_amp": 0.0, "drift_amp": 0.0}
    synth.generate_cohort(tmp_path, "state", 3, 1, 0.0, 0, cfg, fs5, A, aff, shape, brain)
    P = g.build_flat(fs5, 4.8, 8, "volume", aff, shape)
    Paint = synth.paint_matrix(A)
    sid = "sub-st000"
    X, tr = read_nifti(next((tmp_path / sid / "func").glob("*_bold.nii.gz")), shape, aff)
    truth = np.load(tmp_path / sid / f"{sid}_truth.npz")
    reg = truth["run1_regressors"]  # (6, T)
    F = P.apply(X.astype(np.float64))  # (D, T)
    D = np.c_[reg.T, np.ones(reg.shape[1])]
    beta = np.linalg.lstsq(D, F.T, rcond=None)[0][:6]  # (6, D)
    expected = (P.M @ (Paint @ truth["task_maps"].T.astype(np.float64))).T  # (6, D)
    for c in range(6):
        r = np.corrcoef(beta[c], expected[c])[0, 1]
        assert r > 0.999, (c, r)
    # the amplitude is 10 x a_task (intensity = 1000 + 10 x signal)
    ratio = np.linalg.lstsq(expected[0][:, None], beta[0], rcond=None)[0][0]
    assert ratio == pytest.approx(10 * cfg["a_task"], rel=0.01)
