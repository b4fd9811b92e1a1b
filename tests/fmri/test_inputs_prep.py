"""Input validation (errors name the file, nothing half-written) and prep normalization/resampling."""

import gzip

import nibabel as nib
import numpy as np
import pytest

from paperflow.fmri import stages
from paperflow.fmri.inputs import InputError, read_nifti
from paperflow.fmri.prep import prep_run, resample_tr, zscore_rows


def _run(path, shape, aff, T=6, tr=2.0):
    img = nib.Nifti1Image(np.random.default_rng(1).standard_normal((*shape, T)).astype(np.float32), aff)
    img.header.set_zooms((*img.header.get_zooms()[:3], tr))
    nib.save(img, path)
    return path


def test_good_run_reads(grid8, tmp_path):
    aff, shape, _ = grid8
    X, tr = read_nifti(_run(tmp_path / "ok.nii.gz", shape, aff), shape, aff)
    assert X.shape == (int(np.prod(shape)), 6) and tr == 2.0 and X.dtype == np.float32


def test_corrupt_wrong_shape_and_affine_name_the_file(grid8, tmp_path):
    aff, shape, _ = grid8
    good = _run(tmp_path / "good.nii.gz", shape, aff)
    raw = good.read_bytes()
    trunc = tmp_path / "sub-01_truncated_bold.nii.gz"
    trunc.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="sub-01_truncated_bold.nii.gz"):
        read_nifti(trunc, shape, aff)
    garbage = tmp_path / "garbage_bold.nii.gz"
    garbage.write_bytes(gzip.compress(b"not a nifti header" * 10))
    with pytest.raises(InputError, match="garbage_bold.nii.gz"):
        read_nifti(garbage, shape, aff)
    wrong = _run(tmp_path / "wrongshape_bold.nii.gz", tuple(s + 1 for s in shape), aff)
    with pytest.raises(InputError, match=r"wrongshape_bold.nii.gz: spatial shape"):
        read_nifti(wrong, shape, aff)
    aff2 = aff.copy()
    aff2[0, 3] += 4.0
    shifted = _run(tmp_path / "shifted_bold.nii.gz", shape, aff2)
    with pytest.raises(InputError, match=r"shifted_bold.nii.gz: affine"):
        read_nifti(shifted, shape, aff)
    three_d = tmp_path / "vol3d.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros(shape, np.float32), aff), three_d)
    with pytest.raises(InputError, match="vol3d.nii.gz: expected a 4-D"):
        read_nifti(three_d, shape, aff)


def test_prep_stage_with_bad_run_fails_and_writes_nothing(flat8, fs5, grid8, tmp_path):
    """The prep CLI stops on a mismatched run, names it, and leaves no output directory."""
    from paperflow.fmri.geometry import build_parcel, build_volume

    aff, shape, _ = grid8
    geo = tmp_path / "geometry"
    geo.mkdir()
    flat8.save(geo / "flat.npz")
    build_parcel(fs5, 10, "volume", aff, shape, n_init=1).save(geo / "parcel.npz")
    build_volume(fs5, aff, shape, 3).save(geo / "volume.npz")
    syn = tmp_path / "synth"
    (syn / "sub-a" / "func").mkdir(parents=True)
    (syn / "participants.tsv").write_text("participant_id\ttrait_group\ttrait_age_u\ttrait_age_bin\tsite\ttr\n"
                                          "sub-a\t0\t0.5\t1\t0\t2.0\n")
    np.savez(syn / "sub-a" / "sub-a_truth.npz", R=np.eye(8))
    aff2 = aff.copy()
    aff2[1, 3] += 8.0
    _run(syn / "sub-a" / "func" / "sub-a_task-rest_run-1_bold.nii.gz", shape, aff2)
    out = tmp_path / "prep"
    with pytest.raises(InputError, match=r"sub-a_task-rest_run-1_bold\.nii\.gz.*affine"):
        stages.prep({"cohort": "trait", "new_tr": 1.0, "clip_frames": 4}, synth=syn, geometry=geo, out=out)
    assert not out.exists() and not (tmp_path / "prep.manifest.json").exists()
    assert not list(tmp_path.glob(".prep*"))  # no temp leftovers


def test_zscore_constant_rows_and_reconstruction(rng):
    F = rng.standard_normal((5, 50)) * 3 + 10
    F[2] = 7.0  # constant pixel
    Z, mean, std = zscore_rows(F)
    assert np.allclose(Z[[0, 1, 3, 4]].mean(1), 0) and np.allclose(Z[[0, 1, 3, 4]].std(1), 1)
    assert (Z[2] == 0).all() and mean[2] == 0 and std[2] == 0
    r = prep_run(F, 1.0)
    assert r["bold"].dtype == np.float16 and r["bold"].shape == (50, 5)
    rec = r["bold"].astype(np.float64).T * r["std"][:, None] + r["mean"][:, None]
    ok = [0, 1, 3, 4]
    assert np.abs(rec[ok] - F[ok]).max() < 3e-3 * np.abs(F).max()


@pytest.mark.parametrize("tr", [0.72, 2.0, 1.0])
def test_resample_length_and_slow_signal_preserved(tr):
    T = int(300 / tr)
    t = np.arange(T) * tr
    Z = np.sin(2 * np.pi * 0.02 * t)[None]
    R = resample_tr(Z, tr, 1.0)
    assert R.shape == (1, int(np.floor(T * tr + 1e-9)))
    truth = np.sin(2 * np.pi * 0.02 * np.arange(R.shape[1]))
    assert np.abs(R[0, 5:-5] - truth[5:-5]).max() < 0.02


def test_downsampling_removes_aliasing():
    """A 0.6 Hz tone at TR 0.72 (above the 0.5 Hz output Nyquist) is attenuated by the anti-alias filter."""
    tr = 0.72
    t = np.arange(int(300 / tr)) * tr
    R = resample_tr(np.sin(2 * np.pi * 0.6 * t)[None], tr, 1.0)
    assert R[0, 10:-10].std() < 0.05


@pytest.mark.parametrize("tr", [0.72, 2.0])
def test_resample_transposed_pchip_is_bit_identical_to_axis1(tr, rng):
    """resample_tr runs PCHIP along axis 0 of a (T, D) copy: same floats as the plain axis=1 form
    (incl. the anti-alias filter path at TR 0.72)."""
    from scipy.interpolate import PchipInterpolator
    from scipy.signal import cheby1, sosfiltfilt

    T = int(60 / tr)
    Z = rng.standard_normal((37, T))
    Z[3] = 0.0  # flat row (PCHIP zero-slope branch)
    Z[4] = np.arange(T)  # monotone row
    n_out = int(np.floor(T * tr + 1e-9))
    ref = sosfiltfilt(cheby1(8, 0.05, 0.8 / (1.0 / tr), output="sos"), Z, axis=1) if tr < 1 else Z
    ref = PchipInterpolator(np.arange(T) * tr, ref, axis=1, extrapolate=True)(np.arange(n_out) * 1.0)
    out = resample_tr(Z, tr, 1.0)
    assert out.shape == ref.shape and np.array_equal(out, ref)
    r = prep_run(Z.astype(np.float32), tr)
    Zs, _, _ = zscore_rows(Z.astype(np.float32))
    Zs = sosfiltfilt(cheby1(8, 0.05, 0.8 / (1.0 / tr), output="sos"), Zs, axis=1) if tr < 1 else Zs
    ref2 = PchipInterpolator(np.arange(T) * tr, Zs, axis=1, extrapolate=True)(np.arange(n_out) * 1.0)
    assert np.array_equal(r["bold"].view(np.uint16), ref2.T.astype(np.float16).view(np.uint16))


def _int16_run(path, shape, aff, T=7, slope=0.0371):
    """An int16 run with scl_slope, as synth writes them."""
    data = np.random.default_rng(5).integers(-32000, 32000, (*shape, T)).astype(np.int16)
    img = nib.Nifti1Image(data, aff)
    img.header.set_slope_inter(slope, 0.0)
    img.header.set_zooms((*img.header.get_zooms()[:3], 0.72))
    nib.save(img, path)
    return path


@pytest.mark.parametrize("kind", ["int16_scaled", "float32"])
def test_nifti_frames_and_fortran_operator_equal_read_nifti_and_apply(kind, flat8, grid8, tmp_path):
    """prep's frame-major path (NiftiFrames chunks in Fortran voxel order, Projector.fortran_operator with
    remapped column indices, as data.prep_cohort uses them) gives the same bits as read_nifti + Projector.apply."""
    from paperflow.fmri.geometry import fortran_index
    from paperflow.fmri.inputs import NiftiFrames

    aff, shape, _ = grid8
    path = (_int16_run if kind == "int16_scaled" else _run)(tmp_path / f"{kind}_bold.nii.gz", shape, aff)
    X, tr = read_nifti(path, shape, aff)
    run = NiftiFrames(path, shape, aff)
    assert run.tr == tr and run.n_frames == X.shape[1]
    c2f = fortran_index(np.arange(X.shape[0]), shape)
    F_ref = flat8.apply(X)
    for t0, t1 in ((0, 3), (3, X.shape[1])):
        Xt = run.chunk(t0, t1)
        assert Xt.dtype == np.float32 and Xt.shape == (t1 - t0, X.shape[0])
        assert np.array_equal(Xt[:, c2f], X[:, t0:t1].T)
        assert np.array_equal(flat8.fortran_operator() @ np.ascontiguousarray(Xt.T), F_ref[:, t0:t1])


def test_nifti_frames_errors_name_the_file(grid8, tmp_path):
    from paperflow.fmri.inputs import NiftiFrames

    aff, shape, _ = grid8
    raw = _run(tmp_path / "good.nii.gz", shape, aff).read_bytes()
    trunc = tmp_path / "sub-01_truncated_bold.nii.gz"
    trunc.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="sub-01_truncated_bold.nii.gz"):
        NiftiFrames(trunc, shape, aff)
    data = np.zeros((*shape, 4), np.float32)
    data[1, 2, 3, 2] = np.nan
    nib.save(nib.Nifti1Image(data, aff), tmp_path / "nan_bold.nii.gz")
    run = NiftiFrames(tmp_path / "nan_bold.nii.gz", shape, aff)
    run.chunk(0, 2)
    with pytest.raises(InputError, match="nan_bold.nii.gz: voxel data contain NaN"):
        run.chunk(2, 4)
