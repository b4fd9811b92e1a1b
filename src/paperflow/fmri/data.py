"""Cohort-level data jobs: build the geometry, generate a synthetic cohort, prep a cohort into
every representation space (each NIfTI is read once and projected by all operators)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.fmri.geometry import Projector

log = logging.getLogger(__name__)
SPACE_FILES = {"flat": "flat.npz", "parcel": "parcel.npz", "volume": "volume.npz"}
FRAME_CHUNK = 16  # frames per chunk when prep reads and projects a run


def load_surface(p: dict[str, Any]):
    from paperflow.fmri import geometry as g

    if p["surface"]["source"] == "fsaverage5":
        return g.load_fsaverage5()
    return g.load_gifti_surface(p["surface"]["files"], p["surface"]["name"])


def build_geometry(p: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    from paperflow.fmri import geometry as g

    surf = load_surface(p)
    aff, shape, _ = g.mni_grid(p["volume_resolution_mm"])
    f, pa, v = p["flat"], p["parcel"], p["volume"]
    projs = {
        "flat": g.build_flat(surf, f["pixel_mm"], f["patch"], "volume", aff, shape, gap_mm=f["gap_mm"],
                             max_edge_mm=f["max_edge_mm"]),
        "parcel": g.build_parcel(surf, pa["n_parcels"], "volume", aff, shape, seed=pa["seed"], n_init=pa["n_init"]),
        "volume": g.build_volume(surf, aff, shape, v["cube"], v["min_frac"]),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    # the input grid + vertex sampling + sphere, so synth jobs need neither nilearn nor the meshes
    A = g.volume_to_vertices(surf, aff, shape)
    _, _, brain = g.mni_grid(p["volume_resolution_mm"])
    with open(out_dir / "grid.npz", "wb") as fh:
        np.savez_compressed(fh, affine=aff, shape=np.asarray(shape), brain=brain, A_data=A.data, A_indices=A.indices,
                            A_indptr=A.indptr, sphere_left=surf.sphere["left"], sphere_right=surf.sphere["right"],
                            surface=np.asarray(surf.name))
    summary = {}
    for name, pr in projs.items():
        pr.save(out_dir / SPACE_FILES[name])
        summary[name] = {"D": pr.D, "n_in": pr.M.shape[1], "nnz_per_row": pr.M.nnz / pr.D, "n_patches": pr.n_patches,
                         "n_nonempty_patches": int(pr.valid_mask().any(1).sum()), "patch_size": pr.patch_size,
                         "projector_id": pr.projector_id, **{k: v for k, v in pr.meta.items() if not isinstance(v, list)}}
    return summary


def load_projectors(geo_dir: Path) -> dict[str, Projector]:
    return {k: Projector.load(Path(geo_dir) / f) for k, f in SPACE_FILES.items()}


class GridSurface:
    """What the generator needs of a surface: sphere coordinates per hemisphere."""

    def __init__(self, z):
        self.name = str(z["surface"])
        self.sphere = {"left": z["sphere_left"], "right": z["sphere_right"]}
        self.n_vertices = {h: int(v.shape[0]) for h, v in self.sphere.items()}
        self.offsets = {"left": 0, "right": self.n_vertices["left"]}


def synth_cohort(p: dict[str, Any], geo_dir: Path, out_dir: Path, progress) -> list[dict]:
    import scipy.sparse as sp

    from paperflow.fmri.synth import generate_cohort

    with np.load(Path(geo_dir) / "grid.npz") as z:
        shape = tuple(int(s) for s in z["shape"])
        aff, brain, surf = z["affine"], z["brain"], GridSurface(z)
        A = sp.csr_matrix((z["A_data"], z["A_indices"], z["A_indptr"]), shape=(sum(surf.n_vertices.values()), int(np.prod(shape))))
    return generate_cohort(out_dir, p["cohort"], p["subjects"], p["runs"], p["duration_s"], p["seed"], p, surf, A,
                           aff, shape, brain, progress=progress)


def prep_cohort(p: dict[str, Any], synth_dir: Path, projs: dict[str, Projector], out_dir: Path, progress) -> dict[str, Any]:
    """Project every run of a cohort into each space; z-score, resample, float16; write Arrow.
    State cohorts become one record per block clip (label = condition, start = onset in 1-s frames)."""
    from paperflow.fmri.inputs import NiftiFrames
    from paperflow.fmri.prep import prep_run, save_splits, sha256_file
    from paperflow.fmri.synth import read_events, read_participants

    parts = read_participants(synth_dir / "participants.tsv")
    cohort, T_clip = p["cohort"], p["clip_frames"]
    ref = next(iter(projs.values()))
    records: dict[str, list[dict]] = {k: [] for k in projs}
    truth: dict[str, Any] = {}
    stats = {"runs": 0, "frames_in": 0, "project_s": 0.0, "max_recon_err": 0.0}
    import time

    for part in progress(parts, f"prep {cohort}"):
        sid = part["participant_id"]
        tz = np.load(synth_dir / sid / f"{sid}_truth.npz")
        truth[sid] = {"R12": float(tz["R"][0, 1]), **{k: part[k] for k in ("trait_group", "trait_age_u", "trait_age_bin", "site", "tr")}}
        for nii in sorted((synth_dir / sid / "func").glob("*_bold.nii.gz")):
            run = NiftiFrames(nii, ref.input_shape, ref.input_affine)
            tr, T_in = round(run.tr, 4), run.n_frames
            # frame-major in chunks (no (voxels, T) transposed copy of the run): F = M @ X exactly
            Fs = {space: np.empty((pr.D, T_in), dtype=np.float32) for space, pr in projs.items()}
            for t0 in range(0, T_in, FRAME_CHUNK):
                # (voxels in file order, frames) C-contiguous, once per chunk for every space; the
                # throughput statistic times the sparse matmul only, as before
                Xf = np.ascontiguousarray(run.chunk(t0, min(t0 + FRAME_CHUNK, T_in)).T)
                for space, pr in projs.items():
                    MF = pr.fortran_operator()
                    t1 = time.perf_counter()
                    Fs[space][:, t0:t0 + Xf.shape[1]] = MF @ Xf
                    stats["project_s"] += time.perf_counter() - t1
            del run
            digest = sha256_file(nii)
            stem = nii.name.removesuffix("_bold.nii.gz")
            ents = dict(kv.split("-", 1) for kv in stem.split("_") if "-" in kv)
            ev_path = nii.parent / f"{stem}_events.tsv"
            events = read_events(ev_path) if ev_path.exists() else None
            stats["runs"] += 1
            stats["frames_in"] += T_in
            for space, pr in projs.items():
                F = Fs.pop(space)
                r = prep_run(F, tr, p["new_tr"])
                if space == "flat":  # storage contract check: bold * std + mean ~ projection (before resampling)
                    if abs(tr - p["new_tr"]) < 1e-9:
                        rec = r["bold"].astype(np.float64) * r["std"] + r["mean"]
                        err = np.abs(rec - F.T).max() / (np.abs(F).max() + 1e-12)
                        stats["max_recon_err"] = max(stats["max_recon_err"], float(err))
                base = {"mean": r["mean"], "std": r["std"], "tr": float(p["new_tr"]), "tr_orig": tr, "space": space,
                        "projector_id": pr.projector_id, "subject": sid, "session": "1", "task": ents.get("task", ""),
                        "run": ents.get("run", "1"), "site": str(part["site"]), "source": nii.name,
                        "source_sha256": digest, "trait_group": part["trait_group"],
                        "trait_age_bin": part["trait_age_bin"]}
                if events is None:
                    records[space].append({**base, "bold": r["bold"], "n_frames": r["bold"].shape[0], "start": -1, "label": -1})
                else:
                    for onset, _dur, c in events:
                        s = int(round(onset / p["new_tr"]))
                        clip = r["bold"][s:s + T_clip]
                        if clip.shape[0] < T_clip:
                            continue
                        records[space].append({**base, "bold": clip, "n_frames": T_clip, "start": s, "label": c})
    out_dir.mkdir(parents=True, exist_ok=True)
    subjects = [q["participant_id"] for q in parts]
    for space, recs in records.items():
        if cohort == "pretrain":
            val = set(subjects[-p["n_val"]:])
            splits = {"train": [r for r in recs if r["subject"] not in val], "validation": [r for r in recs if r["subject"] in val]}
        else:
            splits = {"all": recs}
        save_splits(out_dir / space, splits, projs[space].D)
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1))
    stats["frames_per_s"] = stats["frames_in"] * len(projs) / max(stats["project_s"], 1e-9)
    return stats


def load_runs(prep_dir: Path, space: str, split: str, subjects: list[str] | None = None) -> tuple[list[np.ndarray], Any]:
    """bold arrays (float32, (T, D)) of a split, optionally restricted to `subjects`, and the dataset."""
    from paperflow.fmri.prep import load_splits

    ds = load_splits(Path(prep_dir) / space)[split]
    if subjects is not None:  # row selection without Dataset.filter (which writes cache files into the input dir)
        keep = set(subjects)
        idx = [i for i, s in enumerate(ds["subject"]) if s in keep]
        npds = ds.with_format("numpy")
        return [np.asarray(npds[i]["bold"], dtype=np.float32) for i in idx], None
    return [np.asarray(b, dtype=np.float32) for b in ds.with_format("numpy")["bold"]], ds
