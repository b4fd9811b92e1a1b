"""The flat-map operator: exactness against nilearn and the per-frame path, linear fields,
geometry numbers of the tiny grid, surface (GIFTI/CIFTI) inputs, storage."""

import nibabel as nib
import numpy as np
import pytest
import scipy.sparse as sp

from paperflow.fmri import geometry as g


def _B(P):
    return sp.csr_matrix((P.arrays["B_data"], P.arrays["B_indices"], P.arrays["B_indptr"]), shape=(P.D, P.arrays["vertex_keep"].size))


def test_depth_sampling_matches_nilearn_vol_to_surf(fs5, grid8, rng):
    from nilearn import datasets, surface

    aff, shape, _ = grid8
    vol = rng.standard_normal(shape)
    A = g.volume_to_vertices(fs5, aff, shape)
    fs = datasets.load_fsaverage("fsaverage5")
    ref = np.concatenate([surface.vol_to_surf(nib.Nifti1Image(vol, aff), fs["pial"].parts[h],
                                              inner_mesh=fs["white_matter"].parts[h], kind="depth") for h in g.HEMIS])
    ours = A @ vol.ravel()
    ok = ~np.isnan(ref)
    assert (np.diff(A.indptr) > 0).tolist() == ok.tolist()  # invalid vertices == nilearn's NaNs
    assert np.abs(ours[ok] - ref[ok]).max() < 1e-10


def test_operator_equals_per_frame_path(fs5, grid8, flat8, rng):
    """M @ X (one sparse matmul) == per frame: vol_to_surf, then barycentric interpolation on the same faces."""
    from matplotlib.tri import LinearTriInterpolator, Triangulation
    from nilearn import datasets, surface

    aff, shape, _ = grid8
    X = rng.standard_normal((int(np.prod(shape)), 3))
    F = flat8.apply(X)
    fs = datasets.load_fsaverage("fsaverage5")
    lay_xy, faces = flat8.arrays["vertex_xy"], flat8.arrays["faces"]
    tri = Triangulation(lay_xy[:, 0], lay_xy[:, 1], faces)
    H, W = flat8.meta["H"], flat8.meta["W"]
    xs = flat8.meta["x0"] + 4.8 * np.arange(W)
    ys = flat8.meta["y0"] - 4.8 * np.arange(H)
    XX, YY = np.meshgrid(xs, ys)
    for t in range(X.shape[1]):
        img = nib.Nifti1Image(X[:, t].reshape(shape), aff)
        tex = np.concatenate([surface.vol_to_surf(img, fs["pial"].parts[h], inner_mesh=fs["white_matter"].parts[h],
                                                  kind="depth") for h in g.HEMIS])
        interp = LinearTriInterpolator(tri, np.nan_to_num(tex))(XX, YY)
        ref = np.asarray(interp).ravel()[flat8.arrays["pixel_flat_index"]]
        assert np.abs(ref - F[:, t]).max() <= 1e-10
    F32 = flat8.apply(X.astype(np.float32))
    assert F32.dtype == np.float32
    assert np.abs(F32 - F).max() <= 1e-5 * np.abs(F).max()


def test_linear_field_reproduced_exactly_inside_mask(fs5):
    P = g.build_flat(fs5, 4.8, 8, "surface")
    xy = P.arrays["vertex_xy"]
    f = 0.7 * xy[:, 0] - 1.3 * xy[:, 1] + 5.0  # linear in flat (x, y)
    out = P.apply(f)
    H, W = P.meta["H"], P.meta["W"]
    ii, jj = np.divmod(P.arrays["pixel_flat_index"], W)
    px = P.meta["x0"] + 4.8 * jj
    py = P.meta["y0"] - 4.8 * ii
    assert np.abs(out - (0.7 * px - 1.3 * py + 5.0)).max() < 1e-9
    # weights: 3 per pixel, non-negative, summing to 1
    B = _B(P)
    assert (np.diff(B.indptr) == 3).all() and B.data.min() >= -1e-12
    assert np.allclose(np.asarray(B.sum(axis=1)).ravel(), 1.0)


def test_tiny_grid_geometry_numbers(fs5):
    """Spec §1.3 [M]: fsaverage5 at 4.8 mm -> 64 x 136, D = 5044, 106 non-empty of 136 patches; 27 long faces."""
    P = g.build_flat(fs5, 4.8, 8, "surface")
    assert (P.meta["H"], P.meta["W"], P.D) == (64, 136, 5044)
    assert P.n_patches == 136 and int(P.valid_mask().any(1).sum()) == 106
    assert P.meta["n_faces_long_dropped"] == 27 and P.meta["n_vertices_referenced"] == 19002
    assert P.arrays["pixel_mask"].sum() == P.D
    # every kept vertex has flat z ~ 0 (the cut/medial wall is off-plane)
    z = np.concatenate([fs5.flat[h][:, 2] for h in g.HEMIS])
    assert np.abs(z[P.arrays["vertex_keep"]]).max() < 1e-5


def test_projector_roundtrip_and_tamper_detection(flat8, tmp_path):
    f = tmp_path / "flat.npz"
    flat8.save(f)
    P = g.Projector.load(f)
    assert P.projector_id == flat8.projector_id
    assert (P.M != flat8.M).nnz == 0
    z = dict(np.load(f))
    z["M_data"] = z["M_data"] * 1.01
    np.savez(tmp_path / "bad.npz", **z)
    with pytest.raises(ValueError, match="bad.npz"):
        g.Projector.load(tmp_path / "bad.npz")


def test_gifti_and_cifti_surface_inputs(fs5, tmp_path, rng):
    from paperflow.fmri.inputs import InputError, read_cifti, read_gifti_pair

    P = g.build_flat(fs5, 4.8, 8, "surface")
    nv = (fs5.n_vertices["left"], fs5.n_vertices["right"])
    data = rng.standard_normal((sum(nv), 5)).astype(np.float32)
    paths = []
    for k, h in enumerate(g.HEMIS):
        part = data[:nv[0]] if k == 0 else data[nv[0]:]
        gi = nib.gifti.GiftiImage(darrays=[nib.gifti.GiftiDataArray(part[:, t], meta={"TimeStep": "720"}) for t in range(5)])
        paths.append(tmp_path / f"{h}.func.gii")
        nib.save(gi, paths[-1])
    X, tr = read_gifti_pair(*paths, nv)
    assert tr == pytest.approx(0.72) and np.array_equal(X, data)
    assert np.allclose(P.apply(X), _B(P) @ data, atol=1e-5)
    with pytest.raises(InputError, match="left.func.gii"):
        read_gifti_pair(paths[0], paths[1], (nv[0] + 1, nv[1]))
    # CIFTI dtseries with cortex structures missing some (medial wall) vertices -> zeros there
    keep_l = np.arange(0, nv[0], 2)
    keep_r = np.arange(1, nv[1], 3)
    bm = (nib.cifti2.BrainModelAxis.from_surface(keep_l, nv[0], "CortexLeft")
          + nib.cifti2.BrainModelAxis.from_surface(keep_r, nv[1], "CortexRight"))
    series = nib.cifti2.SeriesAxis(0, 2.0, 5)
    dd = np.concatenate([data[keep_l], data[nv[0] + keep_r]]).T
    cpath = tmp_path / "x.dtseries.nii"
    nib.save(nib.cifti2.Cifti2Image(dd, header=(series, bm)), cpath)
    Xc, trc = read_cifti(cpath, nv)
    assert trc == 2.0
    exp = np.zeros_like(data)
    exp[keep_l] = data[keep_l]
    exp[nv[0] + keep_r] = data[nv[0] + keep_r]
    assert np.array_equal(Xc, exp)


def test_parcel_and_volume_operators(fs5, grid8):
    aff, shape, _ = grid8
    Q = g.build_parcel(fs5, 20, "volume", aff, shape, n_init=1)
    assert Q.D == 20 and np.allclose(np.asarray(Q.M.sum(axis=1)).ravel(), 1.0)  # averages of samplings
    V = g.build_volume(fs5, aff, shape, 3)
    x = np.arange(int(np.prod(shape)), dtype=float)
    out = V.apply(x)  # a selection: every output is one voxel's value, each voxel once
    assert len(np.unique(out)) == V.D and V.valid_mask().sum() == V.D
    assert V.valid_mask().mean(axis=1).min() > 0.1  # kept cubes hold > 10% cortex
