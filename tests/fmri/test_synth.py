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


def test_nifti_volume_and_write_nifti_keep_the_old_bytes(grid8, tmp_path):
    """write_nifti builds the int16 volume Fortran-ordered (nibabel writes it without per-frame
    strided copies) and gzips it with ISA-L: the decompressed NIfTI (header + data) is what
    nib.save wrote from the old C-ordered array."""
    import gzip

    aff, shape, _ = grid8
    rng = np.random.default_rng(3)
    T = 5
    inside = np.sort(rng.choice(int(np.prod(shape)), 400, replace=False))
    values = (1000 + 10 * rng.standard_normal((len(inside), T))).astype(np.float32)
    values[0, 0] = -1500.0  # max |value| from a negative entry
    old = np.zeros((int(np.prod(shape)), T), dtype=np.int16)
    slope_old = float(np.abs(values).max()) / 32000.0 or 1.0
    old[inside] = np.round(values / slope_old).astype(np.int16)
    old = old.reshape(*shape, T)
    data, slope = synth.nifti_volume(inside, values, shape)
    assert slope == slope_old and data.flags.f_contiguous and data.dtype == np.int16 and np.array_equal(data, old)

    synth.write_nifti(tmp_path / "new.nii.gz", inside, values, shape, aff, 0.72)
    img = nib.Nifti1Image(old, aff)
    img.header.set_slope_inter(slope_old, 0.0)
    img.header.set_xyzt_units("mm", "sec")
    img.header.set_zooms(tuple(img.header.get_zooms()[:3]) + (0.72,))
    nib.save(img, tmp_path / "old.nii.gz")
    raw_new = (tmp_path / "new.nii.gz").read_bytes()
    assert raw_new[:2] == b"\x1f\x8b" and gzip.decompress(raw_new) == gzip.decompress((tmp_path / "old.nii.gz").read_bytes())
    back = nib.load(tmp_path / "new.nii.gz")
    assert back.dataobj.slope == pytest.approx(slope_old) and np.array_equal(back.dataobj.get_unscaled(), old)


def test_drift_cast_into_float32_equals_astype():
    """to_volume's drift term: float64 products cast into a float32 buffer == (a * d).astype(float32)."""
    rng = np.random.default_rng(0)
    a, d = 0.3 * rng.standard_normal((50, 1)), np.linspace(-1.0, 1.0, 37)
    out = np.empty((50, 37), np.float32)
    np.multiply(a, d, out=out, casting="same_kind")
    assert np.array_equal(out, (a * d).astype(np.float32))
