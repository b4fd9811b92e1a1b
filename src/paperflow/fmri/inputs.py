"""Input readers: NIfTI volumes (MNI space), GIFTI per-hemisphere surface series and CIFTI dense
time series, each checked against the projector's input space. Every error names the file.

All readers return X with shape (N_in, T) float32 and the repetition time in seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class InputError(ValueError):
    """An input run does not match the projector (message names the file)."""


def _open_nifti(path: Path, shape: tuple[int, ...], affine: np.ndarray, atol: float):
    import nibabel as nib

    try:
        img = nib.load(str(path))
    except Exception as e:  # noqa: BLE001 - nibabel raises many types
        raise InputError(f"{path}: cannot read NIfTI header ({type(e).__name__}: {e})") from e
    if len(img.shape) != 4:
        raise InputError(f"{path}: expected a 4-D run, got shape {img.shape}")
    if tuple(img.shape[:3]) != tuple(shape):
        raise InputError(f"{path}: spatial shape {img.shape[:3]} != projector grid {tuple(shape)}")
    if not np.allclose(img.affine, affine, atol=atol):
        raise InputError(f"{path}: affine does not match the projector grid\n{img.affine}\nvs\n{affine}")
    return img


def _nifti_tr(img, path: Path) -> float:
    tr = float(img.header.get_zooms()[3])
    if not tr > 0:
        raise InputError(f"{path}: repetition time pixdim[4] = {tr} is not positive")
    return tr


def read_nifti(path: str | Path, shape: tuple[int, ...], affine: np.ndarray, atol: float = 1e-3) -> tuple[np.ndarray, float]:
    """4-D NIfTI -> (prod(shape), T) float32 in C order over (i, j, k); TR from pixdim[4]."""
    path = Path(path)
    img = _open_nifti(path, shape, affine, atol)
    try:
        data = np.asarray(img.dataobj, dtype=np.float32)
    except Exception as e:  # noqa: BLE001 - truncated gzip -> EOFError, zlib.error, OSError...
        raise InputError(f"{path}: cannot read voxel data ({type(e).__name__}: {e})") from e
    if not np.isfinite(data).all():
        raise InputError(f"{path}: voxel data contain NaN/inf")
    tr = _nifti_tr(img, path)
    T = data.shape[3]
    return data.reshape(-1, T), tr


class NiftiFrames:
    """A 4-D NIfTI run read frame-major, without the (voxels, T) transposed copy: `chunk(t0, t1)`
    is frames t0..t1-1 as (t1 - t0, prod(shape)) float32 with the voxels in the file's (Fortran)
    order, i fastest. Values are bit-identical to read_nifti's (nibabel's own scaling, applied per
    chunk: it is elementwise): chunk(t0, t1)[t - t0, fortran_index(v)] == read_nifti(...)[v, t]."""

    def __init__(self, path: str | Path, shape: tuple[int, ...], affine: np.ndarray, atol: float = 1e-3):
        from nibabel.volumeutils import apply_read_scaling

        self.path = Path(path)
        img = _open_nifti(self.path, shape, affine, atol)
        proxy = img.dataobj
        try:
            raw = proxy.get_unscaled() if hasattr(proxy, "get_unscaled") else np.asarray(proxy)
        except Exception as e:  # noqa: BLE001 - truncated gzip -> EOFError, zlib.error, OSError...
            raise InputError(f"{self.path}: cannot read voxel data ({type(e).__name__}: {e})") from e
        self.tr = _nifti_tr(img, self.path)
        self.n_frames = int(raw.shape[3])
        self.frames = raw.reshape(-1, self.n_frames, order="F").T  # (T, N) view: frame-major when raw is F-ordered
        # the scale factors as nibabel's ArrayProxy._get_scaled(dtype=float32) prepares them
        slope = np.asanyarray(getattr(proxy, "slope", 1.0))
        inter = np.asanyarray(getattr(proxy, "inter", 0.0))
        if np.can_cast(slope, np.float32):
            slope = slope.astype(np.float32)
        if np.can_cast(inter, np.float32):
            inter = inter.astype(np.float32)
        self._scale = lambda a: apply_read_scaling(a, slope, inter)

    def chunk(self, t0: int, t1: int) -> np.ndarray:
        a = self._scale(self.frames[t0:t1])
        a = a.astype(np.promote_types(a.dtype, np.float32), copy=False).astype(np.float32, copy=False)
        if not np.isfinite(a).all():
            raise InputError(f"{self.path}: voxel data contain NaN/inf")
        return a


def read_gifti_pair(left: str | Path, right: str | Path, n_vertices: tuple[int, int], tr: float | None = None) -> tuple[np.ndarray, float]:
    """Two func GIFTI files (one per hemisphere; one darray per frame, or one (V, T) darray)
    -> (V_left + V_right, T). TR from the `TimeStep` metadata (ms) unless given."""
    import nibabel as nib

    parts, trs = [], []
    for path, n in zip((left, right), n_vertices):
        path = Path(path)
        try:
            g = nib.load(str(path))
            arrs = [np.asarray(d.data, dtype=np.float32) for d in g.darrays]
        except Exception as e:  # noqa: BLE001
            raise InputError(f"{path}: cannot read GIFTI ({type(e).__name__}: {e})") from e
        if not arrs:
            raise InputError(f"{path}: GIFTI file has no data arrays")
        x = arrs[0] if len(arrs) == 1 and arrs[0].ndim == 2 else np.stack([a.ravel() for a in arrs], axis=1)
        if x.shape[0] != n:
            raise InputError(f"{path}: {x.shape[0]} vertices != surface's {n}")
        if not np.isfinite(x).all():
            raise InputError(f"{path}: data contain NaN/inf")
        parts.append(x)
        ts = g.darrays[0].meta.get("TimeStep") if g.darrays else None
        trs.append(float(ts) / 1000.0 if ts else None)
    if parts[0].shape[1] != parts[1].shape[1]:
        raise InputError(f"{left} / {right}: hemispheres have different frame counts")
    tr = tr or trs[0]
    if not tr:
        raise InputError(f"{left}: no TimeStep metadata; pass the TR explicitly")
    return np.concatenate(parts), float(tr)


def read_cifti(path: str | Path, n_vertices: tuple[int, int]) -> tuple[np.ndarray, float]:
    """CIFTI-2 dtseries (e.g. fs_LR 91k): the CORTEX_LEFT/RIGHT structures expanded to the full
    vertex sets (missing vertices = 0) -> (V_left + V_right, T)."""
    import nibabel as nib

    path = Path(path)
    try:
        img = nib.load(str(path))
        data = np.asarray(img.get_fdata(dtype=np.float32))  # (T, grayordinates)
        bm_axis = img.header.get_axis(1)
        series = img.header.get_axis(0)
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{path}: cannot read CIFTI ({type(e).__name__}: {e})") from e
    out = np.zeros((sum(n_vertices), data.shape[0]), dtype=np.float32)
    found = set()
    for name, slc, bm in bm_axis.iter_structures():
        hemi = {"CIFTI_STRUCTURE_CORTEX_LEFT": 0, "CIFTI_STRUCTURE_CORTEX_RIGHT": 1}.get(name)
        if hemi is None:
            continue
        if bm.nvertices[name] != n_vertices[hemi]:
            raise InputError(f"{path}: {name} has {bm.nvertices[name]} vertices != surface's {n_vertices[hemi]}")
        out[hemi * n_vertices[0] + bm.vertex[bm.vertex >= 0], :] = data[:, slc].T
        found.add(hemi)
    if found != {0, 1}:
        raise InputError(f"{path}: CIFTI lacks a CORTEX_LEFT/CORTEX_RIGHT structure")
    return out, float(series.step)
