"""Benchmark: flat-map projection of a 4-D run as ONE sparse matmul vs the per-frame path
(nilearn vol_to_surf per frame and hemisphere, then linear interpolation on the same flat faces).

    OMP_NUM_THREADS=1 python bench/fmri_flatmap.py --frames 60 [--res 4]

Prints JSON: build time of the operator, per-frame-path and operator seconds/frames-per-second,
speed-up, and the max difference between the two results (they must agree to ~1e-12).
"""

from __future__ import annotations

import argparse
import json
import time

import nibabel as nib
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--res", type=int, default=4)
    a = ap.parse_args()
    from matplotlib.tri import LinearTriInterpolator, Triangulation
    from nilearn import datasets, surface

    from paperflow.fmri import geometry as g

    surf = g.load_fsaverage5()
    aff, shape, _ = g.mni_grid(a.res)
    t0 = time.perf_counter()
    P = g.build_flat(surf, 4.8, 8, "volume", aff, shape)
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    X = rng.standard_normal((int(np.prod(shape)), a.frames)).astype(np.float32)
    img4d = nib.Nifti1Image(X.reshape(*shape, a.frames), aff)

    # per-frame path: vol_to_surf on every frame (nilearn loops over frames internally), then interpolation
    fs = datasets.load_fsaverage("fsaverage5")
    tri = Triangulation(P.arrays["vertex_xy"][:, 0], P.arrays["vertex_xy"][:, 1], P.arrays["faces"])
    H, W = P.meta["H"], P.meta["W"]
    XX, YY = np.meshgrid(P.meta["x0"] + 4.8 * np.arange(W), P.meta["y0"] - 4.8 * np.arange(H))
    idx = P.arrays["pixel_flat_index"]
    t0 = time.perf_counter()
    ref = np.empty((P.D, a.frames))
    for t in range(a.frames):
        frame = nib.Nifti1Image(np.asarray(img4d.dataobj[..., t]), aff)
        tex = np.concatenate([surface.vol_to_surf(frame, fs["pial"].parts[h], inner_mesh=fs["white_matter"].parts[h],
                                                  kind="depth") for h in g.HEMIS])
        ref[:, t] = np.asarray(LinearTriInterpolator(tri, np.nan_to_num(tex))(XX, YY)).ravel()[idx]
    per_frame_s = time.perf_counter() - t0

    P.apply(X[:, :1])  # cache the float32 copy of M (one-off, like building it)
    reps = 5
    t0 = time.perf_counter()
    for _ in range(reps):
        F = P.apply(X)
    op_s = (time.perf_counter() - t0) / reps
    F64 = P.apply(X.astype(np.float64))
    out = {"frames": a.frames, "grid_mm": a.res, "n_voxels": int(np.prod(shape)), "D": P.D, "nnz_per_row": P.M.nnz / P.D,
           "operator_build_s": round(build_s, 3), "per_frame_path_s": round(per_frame_s, 3),
           "per_frame_fps": round(a.frames / per_frame_s, 2), "operator_s": round(op_s, 5),
           "operator_fps": round(a.frames / op_s, 1), "speedup": round(per_frame_s / op_s, 1),
           "max_abs_diff_float64": float(np.abs(F64 - ref).max()),
           "max_rel_diff_float32": float(np.abs(F - ref).max() / np.abs(ref).max())}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
