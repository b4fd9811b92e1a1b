"""Geometry: the sparse operators that map an input space (MNI volume or surface vertices) to a
representation space (flat-map pixels, k-means parcels, volume cubes), built once.

Every operator is stored as a `Projector`: a CSR matrix M (D x N_in) plus a *patch layout*
(`patch_index`, `patch_pos` per output row, `n_patches`, `patch_size`), so that one MAE handles
flat patches, parcels and volume cubes alike. Applying it to a run is one sparse-dense product
F = M @ X with X the (N_in x T) run.

Volume -> vertex sampling reproduces `nilearn.surface.vol_to_surf(kind="depth",
interpolation="linear", inner_mesh=white)` exactly as a sparse matrix (see `depth_sampling_matrix`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

HEMIS = ("left", "right")


# --------------------------------------------------------------------------------------- meshes
@dataclass
class Surface:
    """Both hemispheres of one subject/template surface set (vertex order: left then right)."""

    name: str
    pial: dict[str, np.ndarray]
    white: dict[str, np.ndarray]
    flat: dict[str, np.ndarray]
    flat_faces: dict[str, np.ndarray]
    sphere: dict[str, np.ndarray]
    n_vertices: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.n_vertices = {h: int(self.flat[h].shape[0]) for h in HEMIS}

    @property
    def offsets(self) -> dict[str, int]:
        return {"left": 0, "right": self.n_vertices["left"]}

    @property
    def n_total(self) -> int:
        return sum(self.n_vertices.values())


def load_fsaverage5() -> Surface:
    """fsaverage5 meshes shipped inside the nilearn wheel (no download)."""
    from nilearn import datasets

    fs = datasets.load_fsaverage("fsaverage5")

    def parts(key: str, what: str = "coordinates") -> dict[str, np.ndarray]:
        return {h: np.asarray(getattr(fs[key].parts[h], what)) for h in HEMIS}

    return Surface("fsaverage5", pial=parts("pial"), white=parts("white_matter"), flat=parts("flat"),
                   flat_faces=parts("flat", "faces"), sphere=parts("sphere"))


def _read_gifti_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    import nibabel as nib

    try:
        g = nib.load(str(path))
        coords = g.agg_data("NIFTI_INTENT_POINTSET")
        faces = g.agg_data("NIFTI_INTENT_TRIANGLE")
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{path}: not a readable GIFTI surface ({e})") from e
    if coords is None or faces is None:
        raise ValueError(f"{path}: GIFTI file has no POINTSET/TRIANGLE arrays")
    return np.asarray(coords, dtype=np.float64), np.asarray(faces, dtype=np.int64)


def load_gifti_surface(files: dict[str, dict[str, str]], name: str = "user") -> Surface:
    """User surfaces (e.g. fs_LR 32k from HCP S1200): files[kind][hemi] -> GIFTI path,
    kind in pial, white, flat, sphere. Flat meshes keep cut vertices off the z=0 plane."""
    data: dict[str, dict[str, np.ndarray]] = {k: {} for k in ("pial", "white", "flat", "sphere", "flat_faces")}
    for kind in ("pial", "white", "flat", "sphere"):
        for h in HEMIS:
            c, f = _read_gifti_mesh(files[kind][h])
            data[kind][h] = c
            if kind == "flat":
                data["flat_faces"][h] = f
    for h in HEMIS:
        n = {k: data[k][h].shape[0] for k in ("pial", "white", "flat", "sphere")}
        if len(set(n.values())) != 1:
            raise ValueError(f"surface {name} {h}: vertex counts differ between meshes {n}")
    return Surface(name, **data)


# ------------------------------------------------------------------------- volume -> vertices
def depth_sampling_matrix(outer: np.ndarray, inner: np.ndarray, affine: np.ndarray, shape: tuple[int, int, int],
                          n_samples: int = 10, mask: np.ndarray | None = None) -> sp.csr_matrix:
    """Sparse A (V x prod(shape)) with A @ vol.ravel() == vol_to_surf(kind='depth', linear).

    For each vertex: n_samples points from outer (depth 0) to inner (1), in voxel coordinates;
    samples outside [0, n) in any axis (or whose floor voxel is outside `mask`) are dropped; the
    vertex value is the mean over the remaining samples of the trilinear interpolant. Rows of
    vertices without any remaining sample are empty (nilearn returns NaN there).
    """
    shape = tuple(int(s) for s in shape)
    V = outer.shape[0]
    steps = np.linspace(0.0, 1.0, n_samples)[:, None, None]
    loc = outer[None] + steps * (inner - outer)[None]  # (S, V, 3) mm
    loc = np.transpose(loc, (1, 0, 2)).reshape(-1, 3)  # (V*S, 3), vertex-major
    inv = np.linalg.inv(affine)
    vox = loc @ inv[:3, :3].T + inv[:3, 3]
    kept = (vox >= 0).all(axis=1)
    for d, n in enumerate(shape):
        kept &= vox[:, d] < n
    if mask is not None:
        idx = np.floor(vox[kept]).astype(int)
        kept[np.flatnonzero(kept)] = mask[idx[:, 0], idx[:, 1], idx[:, 2]] != 0
    i0 = np.floor(vox).astype(np.int64)
    frac = vox - i0
    # nilearn extrapolates in (n-1, n); a sample exactly on the last plane needs no extrapolation
    bad = kept & ((i0 >= np.array(shape) - 1) & (frac > 0)).any(axis=1)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} depth samples fall in the last voxel slab (nilearn would "
                         "extrapolate); the volume does not cover the cortex with a margin")
    i0 = np.minimum(i0, np.array(shape) - 2)  # exact last-plane samples: corner weight 1 at i0+1
    frac = vox - i0
    vertex = np.repeat(np.arange(V), n_samples)
    n_kept = np.bincount(vertex[kept], minlength=V).astype(np.float64)
    rows, cols, vals = [], [], []
    strides = np.array([shape[1] * shape[2], shape[2], 1])
    kv = np.flatnonzero(kept)
    for corner in range(8):
        off = np.array([(corner >> 2) & 1, (corner >> 1) & 1, corner & 1])
        w = np.prod(np.where(off == 1, frac[kv], 1.0 - frac[kv]), axis=1)
        c = ((i0[kv] + off) * strides).sum(axis=1)
        rows.append(vertex[kv])
        cols.append(c)
        vals.append(w / n_kept[vertex[kv]])
    A = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(V, int(np.prod(shape))))
    A.sum_duplicates()
    A.eliminate_zeros()
    return A


def volume_to_vertices(surf: Surface, affine: np.ndarray, shape: tuple[int, int, int]) -> sp.csr_matrix:
    """A for both hemispheres stacked (left rows first)."""
    return sp.vstack([depth_sampling_matrix(surf.pial[h], surf.white[h], affine, shape) for h in HEMIS]).tocsr()


def surface_selector(surf: Surface) -> sp.csr_matrix:
    """S for surface inputs: identity over the concatenated (left, right) vertex columns."""
    return sp.identity(surf.n_total, format="csr", dtype=np.float64)


# ------------------------------------------------------------------------------ flat layout
@dataclass
class FlatLayout:
    xy: np.ndarray  # (V_total, 2) stacked flat coordinates (mm)
    keep: np.ndarray  # (V_total,) bool vertex mask
    faces: np.ndarray  # (F, 3) surviving faces (global vertex ids)
    n_faces_in: int
    n_faces_long: int


def flat_layout(surf: Surface, valid_vertex: np.ndarray, gap_mm: float = 8.0, max_edge_mm: float = 16.0,
                z_tol: float = 1e-5) -> FlatLayout:
    """Hemispheres side by side (left max x = -gap, right min x = +gap), vertex mask
    (flat z ~ 0 and valid input), faces with 3 kept vertices and longest 2-D edge < max_edge_mm."""
    xy, keep, faces = [], [], []
    n_in = n_long = 0
    for h in HEMIS:
        c = surf.flat[h].astype(np.float64)
        shift = (-gap_mm - c[:, 0].max()) if h == "left" else (gap_mm - c[:, 0].min())
        xy.append(np.c_[c[:, 0] + shift, c[:, 1]])
        keep.append(np.abs(c[:, 2]) < z_tol)
        faces.append(surf.flat_faces[h] + surf.offsets[h])
    xy_a = np.concatenate(xy)
    keep_a = np.concatenate(keep) & valid_vertex
    f = np.concatenate(faces)
    n_in = len(f)
    f = f[keep_a[f].all(axis=1)]
    p = xy_a[f]
    edges = np.stack([np.linalg.norm(p[:, i] - p[:, (i + 1) % 3], axis=1) for i in range(3)], axis=1)
    long_ = edges.max(axis=1) >= max_edge_mm
    n_long = int(long_.sum())
    return FlatLayout(xy_a, keep_a, f[~long_], n_in, n_long)


def grid_centres(layout: FlatLayout, pixel_mm: float, patch: int) -> dict[str, Any]:
    """Grid centred on the kept-vertex bounding box; H, W multiples of `patch`; row 0 on top."""
    used = np.unique(layout.faces)
    p = layout.xy[used]
    lo, hi = p.min(axis=0), p.max(axis=0)
    cx, cy = (lo + hi) / 2
    step = pixel_mm * patch
    W = int(np.ceil((hi[0] - lo[0]) / step)) * patch
    H = int(np.ceil((hi[1] - lo[1]) / step)) * patch
    xs = cx + pixel_mm * (np.arange(W) - (W - 1) / 2)
    ys = cy - pixel_mm * (np.arange(H) - (H - 1) / 2)
    return {"H": H, "W": W, "pixel_mm": pixel_mm, "patch": patch, "xs": xs, "ys": ys}


def barycentric_matrix(layout: FlatLayout, grid: dict[str, Any]) -> tuple[sp.csr_matrix, np.ndarray]:
    """B (D x V_total): linear barycentric weights of the surviving face containing each pixel
    centre; returns B and the (H, W) pixel mask (pixel centre inside a surviving face)."""
    from matplotlib.tri import Triangulation

    H, W = grid["H"], grid["W"]
    X, Y = np.meshgrid(grid["xs"], grid["ys"])  # (H, W), row 0 on top
    tri = Triangulation(layout.xy[:, 0], layout.xy[:, 1], layout.faces)
    face = tri.get_trifinder()(X.ravel(), Y.ravel())
    valid = face >= 0
    pix = np.flatnonzero(valid)
    fv = layout.faces[face[pix]]  # (D, 3)
    a, b, c = (layout.xy[fv[:, k]] for k in range(3))
    q = np.c_[X.ravel()[pix], Y.ravel()[pix]]
    v0, v1, v2 = b - a, c - a, q - a
    den = v0[:, 0] * v1[:, 1] - v1[:, 0] * v0[:, 1]
    l1 = (v2[:, 0] * v1[:, 1] - v1[:, 0] * v2[:, 1]) / den
    l2 = (v0[:, 0] * v2[:, 1] - v2[:, 0] * v0[:, 1]) / den
    w = np.c_[1 - l1 - l2, l1, l2]
    D = len(pix)
    B = sp.csr_matrix((w.ravel(), (np.repeat(np.arange(D), 3), fv.ravel())), shape=(D, layout.xy.shape[0]))
    return B, valid.reshape(H, W)


# ------------------------------------------------------------------------------- projector
def fortran_index(c_index: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Flat voxel indices in C order (k fastest, as the operator's columns) -> the same voxels' flat
    indices in Fortran order (i fastest, the NIfTI file's byte order)."""
    return np.ravel_multi_index(np.unravel_index(c_index, shape), shape, order="F")


@dataclass
class Projector:
    """M (D x N_in) and the patch layout of its D output rows. `meta` holds the space's grid."""

    space: str
    M: sp.csr_matrix
    patch_index: np.ndarray  # (D,) int
    patch_pos: np.ndarray  # (D,) int
    n_patches: int
    patch_size: int
    input_kind: str  # "volume" | "surface"
    input_shape: tuple[int, ...]  # volume shape or (V_left, V_right)
    input_affine: np.ndarray  # (4, 4); identity for surfaces
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # pixel mask, vertex mask, parcel labels ...

    @property
    def D(self) -> int:
        return self.M.shape[0]

    @property
    def projector_id(self) -> str:
        h = hashlib.sha256()
        for a in (self.M.indptr, self.M.indices, self.M.data, self.patch_index, self.patch_pos,
                  np.asarray(self.input_shape), self.input_affine):
            h.update(np.ascontiguousarray(a).tobytes())
        for k in sorted(self.arrays):
            h.update(k.encode())
            h.update(np.ascontiguousarray(self.arrays[k]).tobytes())
        h.update(json.dumps({"space": self.space, "meta": self.meta, "kind": self.input_kind,
                             "n": self.n_patches, "p": self.patch_size}, sort_keys=True, default=str).encode())
        return h.hexdigest()

    def valid_mask(self) -> np.ndarray:
        """(n_patches, patch_size) bool: which positions of a patch carry data."""
        m = np.zeros((self.n_patches, self.patch_size), dtype=bool)
        m[self.patch_index, self.patch_pos] = True
        return m

    def to_patches(self, F: np.ndarray) -> np.ndarray:
        """(..., D) -> (..., n_patches, patch_size) with zeros at invalid positions."""
        out = np.zeros(F.shape[:-1] + (self.n_patches, self.patch_size), dtype=F.dtype)
        out[..., self.patch_index, self.patch_pos] = F
        return out

    def to_image(self, f: np.ndarray, fill: float = np.nan) -> np.ndarray:
        """Flat space only: (D,) -> (H, W) image with `fill` outside the pixel mask."""
        H, W = self.meta["H"], self.meta["W"]
        img = np.full(H * W, fill, dtype=np.float64)
        img[self.arrays["pixel_flat_index"]] = f
        return img.reshape(H, W)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """F = M @ X for X (N_in, T): one sparse-dense product. float32 input stays float32
        (a float32 copy of M is cached, so X is never upcast/copied); float64 input uses M as stored."""
        if X.dtype == np.float32:
            if "_M32" not in self.__dict__:
                self.__dict__["_M32"] = self.M.astype(np.float32)
            return self.__dict__["_M32"] @ X
        return self.M @ X

    def fortran_operator(self) -> sp.csr_matrix:
        """The float32 operator with its column indices remapped from C to Fortran (NIfTI file, i
        fastest) voxel order, each row's stored entries kept in their order: `fortran_operator() @ Xf`
        on a run Xf (N_in, c) with voxels in file order is bit-identical to `apply(X)` on the C-ordered
        X, since every output sums the same products in the same order (cached)."""
        if "_MF32" not in self.__dict__:
            if self.input_kind != "volume":
                raise ValueError(f"fortran_operator needs a volume-input projector, not {self.input_kind!r}")
            if "_M32" not in self.__dict__:
                self.__dict__["_M32"] = self.M.astype(np.float32)
            M32 = self.__dict__["_M32"]
            shape = tuple(int(s) for s in self.input_shape)
            c2f = fortran_index(np.arange(int(np.prod(shape))), shape)
            self.__dict__["_MF32"] = sp.csr_matrix((M32.data, c2f[M32.indices].astype(M32.indices.dtype), M32.indptr),
                                                   shape=M32.shape)
        return self.__dict__["_MF32"]

    def save(self, path: str | Path) -> None:
        from paperflow.core.io import atomic_path

        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(
                    fh, M_data=self.M.data, M_indices=self.M.indices, M_indptr=self.M.indptr,
                    M_shape=np.asarray(self.M.shape), patch_index=self.patch_index, patch_pos=self.patch_pos,
                    input_shape=np.asarray(self.input_shape), input_affine=self.input_affine,
                    header=np.frombuffer(json.dumps({
                        "space": self.space, "n_patches": self.n_patches, "patch_size": self.patch_size,
                        "input_kind": self.input_kind, "meta": self.meta, "projector_id": self.projector_id,
                    }, default=str).encode(), dtype=np.uint8),
                    **{f"arr_{k}": v for k, v in self.arrays.items()})

    @classmethod
    def load(cls, path: str | Path) -> "Projector":
        with np.load(path) as z:
            hdr = json.loads(bytes(z["header"]).decode())
            M = sp.csr_matrix((z["M_data"], z["M_indices"], z["M_indptr"]), shape=tuple(z["M_shape"]))
            p = cls(hdr["space"], M, z["patch_index"], z["patch_pos"], hdr["n_patches"], hdr["patch_size"],
                    hdr["input_kind"], tuple(int(s) for s in z["input_shape"]), z["input_affine"], hdr["meta"],
                    {k[4:]: z[k] for k in z.files if k.startswith("arr_")})
        if p.projector_id != hdr["projector_id"]:
            raise ValueError(f"{path}: projector_id mismatch (file corrupted or edited)")
        return p


def _input_operator(surf: Surface, input_kind: str, affine: np.ndarray | None, shape: tuple[int, ...] | None):
    if input_kind == "volume":
        A = volume_to_vertices(surf, affine, shape)
        return A, np.diff(A.indptr) > 0, tuple(shape), np.asarray(affine, dtype=np.float64)
    S = surface_selector(surf)
    return S, np.ones(surf.n_total, bool), (surf.n_vertices["left"], surf.n_vertices["right"]), np.eye(4)


def build_flat(surf: Surface, pixel_mm: float, patch: int, input_kind: str = "volume", affine=None, shape=None,
               vertex_mask: np.ndarray | None = None, gap_mm: float = 8.0, max_edge_mm: float = 16.0) -> Projector:
    """Flat-map projector M = B @ A (volume) or B @ S (surface). `vertex_mask` (e.g. atlas label > 0)
    further restricts the vertices."""
    A, valid_v, in_shape, in_aff = _input_operator(surf, input_kind, affine, shape)
    if vertex_mask is not None:
        valid_v = valid_v & vertex_mask
    lay = flat_layout(surf, valid_v, gap_mm=gap_mm, max_edge_mm=max_edge_mm)
    grid = grid_centres(lay, pixel_mm, patch)
    B, pmask = barycentric_matrix(lay, grid)
    M = (B @ A).tocsr()
    M.sort_indices()
    H, W = grid["H"], grid["W"]
    flat_idx = np.flatnonzero(pmask.ravel())
    ii, jj = np.divmod(flat_idx, W)
    gw = W // patch
    meta = {"H": H, "W": W, "pixel_mm": pixel_mm, "patch": patch, "grid_h": H // patch, "grid_w": gw,
            "x0": float(grid["xs"][0]), "y0": float(grid["ys"][0]), "surface": surf.name, "gap_mm": gap_mm,
            "max_edge_mm": max_edge_mm, "n_faces_in": lay.n_faces_in, "n_faces_long_dropped": lay.n_faces_long,
            "n_faces_kept": int(len(lay.faces)), "n_vertices_kept": int(lay.keep.sum()),
            "n_vertices_referenced": int(len(np.unique(lay.faces)))}
    return Projector("flat", M, (ii // patch) * gw + jj // patch, (ii % patch) * patch + jj % patch, (H // patch) * gw,
                     patch * patch, input_kind, in_shape, in_aff, meta,
                     {"pixel_mask": pmask, "pixel_flat_index": flat_idx, "vertex_keep": lay.keep, "faces": lay.faces,
                      "B_data": B.data, "B_indices": B.indices, "B_indptr": B.indptr,
                      "vertex_xy": lay.xy})


def build_parcel(surf: Surface, n_parcels: int, input_kind: str = "volume", affine=None, shape=None,
                 seed: int = 0, n_init: int = 4, labels: np.ndarray | None = None) -> Projector:
    """Parcel averages: k-means (n_parcels/2 per hemisphere) on unit-sphere coordinates of the
    valid, flat-kept vertices, or given `labels` (V_total,; 0 = none, e.g. an atlas at paper scale).
    M = Q @ A with Q averaging the vertices of each parcel."""
    from sklearn.cluster import KMeans

    A, valid_v, in_shape, in_aff = _input_operator(surf, input_kind, affine, shape)
    if labels is None:
        flat_ok = np.concatenate([np.abs(surf.flat[h][:, 2]) < 1e-5 for h in HEMIS])
        use = valid_v & flat_ok
        labels = np.zeros(surf.n_total, dtype=np.int64)
        k_h = n_parcels // 2
        for hi, h in enumerate(HEMIS):
            off = surf.offsets[h]
            idx = np.flatnonzero(use[off:off + surf.n_vertices[h]])
            u = surf.sphere[h][idx]
            u = u / np.linalg.norm(u, axis=1, keepdims=True)
            km = KMeans(k_h, init="k-means++", n_init=n_init, random_state=seed).fit(u)
            labels[off + idx] = km.labels_ + 1 + hi * k_h
    else:
        labels = np.where(valid_v, labels, 0)
    ids = np.unique(labels[labels > 0])
    row = np.searchsorted(ids, labels[labels > 0])
    cols = np.flatnonzero(labels > 0)
    counts = np.bincount(row, minlength=len(ids)).astype(float)
    Q = sp.csr_matrix((1.0 / counts[row], (row, cols)), shape=(len(ids), surf.n_total))
    M = (Q @ A).tocsr()
    K = len(ids)
    return Projector("parcel", M, np.arange(K), np.zeros(K, dtype=np.int64), K, 1, input_kind, in_shape, in_aff,
                     {"n_parcels": K, "surface": surf.name, "seed": seed}, {"labels": labels})


def build_volume(surf: Surface, affine: np.ndarray, shape: tuple[int, int, int], cube: int,
                 min_frac: float = 0.1) -> Projector:
    """Volume patches: cortex mask = support of A (voxels any vertex samples); pad the grid to a
    multiple of `cube`; keep cubes with > min_frac cortex; M selects the cortex voxels of kept
    cubes (rows ordered by cube, then voxel-in-cube)."""
    A = volume_to_vertices(surf, affine, shape)
    cortex = np.zeros(int(np.prod(shape)), bool)
    cortex[np.unique(A.indices)] = True
    cortex = cortex.reshape(shape)
    pad = [(-s) % cube for s in shape]
    cp = np.pad(cortex, [(0, p) for p in pad])
    g = [s // cube for s in cp.shape]
    blocks = cp.reshape(g[0], cube, g[1], cube, g[2], cube).transpose(0, 2, 4, 1, 3, 5).reshape(-1, cube ** 3)
    keep_cubes = np.flatnonzero(blocks.mean(axis=1) > min_frac)
    pi, pp, vox = [], [], []
    for k, c in enumerate(keep_cubes):
        ci, cj, ck = np.unravel_index(c, g)
        pos = np.flatnonzero(blocks[c])
        oi, oj, ok = np.unravel_index(pos, (cube, cube, cube))
        vi, vj, vk = ci * cube + oi, cj * cube + oj, ck * cube + ok
        inside = (vi < shape[0]) & (vj < shape[1]) & (vk < shape[2])
        pi.append(np.full(inside.sum(), k))
        pp.append(pos[inside])
        vox.append(np.ravel_multi_index((vi[inside], vj[inside], vk[inside]), shape))
    pi, pp, vox = map(np.concatenate, (pi, pp, vox))
    M = sp.csr_matrix((np.ones(len(vox)), (np.arange(len(vox)), vox)), shape=(len(vox), int(np.prod(shape))))
    return Projector("volume", M, pi, pp, len(keep_cubes), cube ** 3, "volume", tuple(shape),
                     np.asarray(affine, float), {"cube": cube, "min_frac": min_frac, "n_cortex_voxels": int(cortex.sum()),
                                                 "n_cubes_kept": int(len(keep_cubes))},
                     {"cortex_mask": cortex, "cube_ids": keep_cubes})


def mni_grid(resolution_mm: int = 4) -> tuple[np.ndarray, tuple[int, int, int], np.ndarray]:
    """nilearn's MNI152 template grid at `resolution_mm` (offline): affine, shape, brain mask."""
    from nilearn import datasets

    m = datasets.load_mni152_brain_mask(resolution=resolution_mm)
    return np.asarray(m.affine, float), tuple(int(s) for s in m.shape), np.asarray(m.get_fdata() > 0)
