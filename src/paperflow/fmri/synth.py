"""Synthetic BOLD generator [reconstruction]: real 4-D NIfTI runs in MNI space (nilearn's MNI152
4 mm grid) with known ground truth.

Vertex-space signal = subject network fields x HRF-convolved coupled latent time courses (+ task
maps x block regressors for task runs); painted into voxels with Paint = row-normalized A^T; noise
inside the brain mask (white + global AR(1) + linear drift); intensity 1000 + 10 x signal, int16.

Labels: state (6 task conditions, block design), trait_group (coupling of networks 1 and 2),
trait_age (scales network 5 and rotates its first bump), site (TR 0.72 / 1.0 / 2.0 s).
Files (BIDS-like): sub-XXX/func/sub-XXX_task-{rest,state6}_run-N_bold.nii.gz, *_events.tsv,
sub-XXX_truth.npz, participants.tsv.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from paperflow.fmri.geometry import HEMIS, Surface, fortran_index

DT = 0.1  # fine time grid (s)
SITES = (0.72, 1.0, 2.0)
N_NET, N_BUMPS, N_TASK = 8, 3, 6
COHORT_IDS = {"pretrain": 1, "state": 2, "trait": 3}


def hrf(dt: float = DT, length: float = 32.0) -> np.ndarray:
    """Canonical double gamma: Gamma(6) - Gamma(16)/6 over 32 s, unit sum."""
    from scipy.stats import gamma

    t = np.arange(0, length, dt)
    h = gamma.pdf(t, 6) - gamma.pdf(t, 16) / 6.0
    return h / h.sum()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _jitter(mu: np.ndarray, deg: float, rng: np.random.Generator) -> np.ndarray:
    """Move unit vectors by a Gaussian tangent displacement of `deg` degrees (sd)."""
    e = rng.standard_normal(mu.shape) * np.deg2rad(deg)
    e -= (e * mu).sum(-1, keepdims=True) * mu
    return _unit(mu + e)


def _rotate_towards(mu: np.ndarray, deg: float, direction: np.ndarray) -> np.ndarray:
    t = direction - (direction @ mu) * mu
    t = t / np.linalg.norm(t)
    a = np.deg2rad(deg)
    return np.cos(a) * mu + np.sin(a) * t


class Template:
    """Population-level design (fixed by `design_seed`): network centres, task maps, base coupling."""

    def __init__(self, surf: Surface, valid: np.ndarray, design_seed: int):
        rng = np.random.default_rng([design_seed, 0])
        self.sphere = {h: _unit(surf.sphere[h].astype(np.float64)) for h in HEMIS}
        self.offsets, self.nv = surf.offsets, surf.n_vertices
        self.valid = valid
        self.mu = _unit(rng.standard_normal((N_NET, N_BUMPS, 3)))
        self.task_mu = _unit(rng.standard_normal((N_TASK, 2, 3)))
        self.age_dir = _unit(rng.standard_normal(3))
        X = rng.standard_normal((N_NET, 3 * N_NET))
        R0 = np.corrcoef(X)
        R0[0, 1] = R0[1, 0] = 0.0  # the trait_group coupling is defined relative to 0
        self.R0 = _nearest_corr(R0)
        self.task_maps = np.stack([self.field(self.task_mu[c], 80.0, weights=(1.0, 0.5)) for c in range(N_TASK)])

    def field(self, mus: np.ndarray, kappa: float, weights=None) -> np.ndarray:
        """Bilateral sum of bumps exp(kappa (u.mu - 1)) (right centre = mu mirrored in x), unit std
        over valid vertices."""
        weights = np.ones(len(mus)) if weights is None else np.asarray(weights)
        out = np.zeros(self.valid.shape[0])
        for h in HEMIS:
            u = self.sphere[h]
            m = mus * (np.array([-1.0, 1.0, 1.0]) if h == "right" else 1.0)
            out[self.offsets[h]:self.offsets[h] + self.nv[h]] = (weights * np.exp(kappa * (u @ m.T - 1.0))).sum(1)
        out -= out[self.valid].mean()
        return out / out[self.valid].std()


def _nearest_corr(R: np.ndarray, floor: float = 0.05) -> np.ndarray:
    R = (R + R.T) / 2
    w, V = np.linalg.eigh(R)
    R = (V * np.maximum(w, floor)) @ V.T
    d = np.sqrt(np.diag(R))
    R = R / np.outer(d, d)
    np.fill_diagonal(R, 1.0)
    return R


def subject_design(tpl: Template, rng: np.random.Generator, group: int, age_u: float, cfg: dict[str, Any]) -> dict[str, Any]:
    R = tpl.R0.copy()
    R[0, 1] = R[1, 0] = tpl.R0[0, 1] + cfg["delta"] * (2 * group - 1)
    J = np.triu(rng.standard_normal(R.shape) * cfg["coupling_jitter"], 1)
    R = _nearest_corr(R + J + J.T)
    mu = _jitter(tpl.mu, cfg["jitter_deg"], rng)
    mu[4, 0] = _rotate_towards(mu[4, 0], 8.0 * age_u, tpl.age_dir)
    fields = np.stack([tpl.field(mu[k], 25.0) for k in range(N_NET)])
    fields[4] *= 1.0 - 0.4 * age_u
    return {"R": R, "fields": fields, "mu": mu}


def block_design(rng: np.random.Generator, reps: int = 2) -> tuple[list[tuple[float, float, int]], float]:
    """6 x reps blocks of 12 s (each condition `reps` times, random order), 10-14 s fixation, 8 s lead."""
    order = rng.permutation(np.repeat(np.arange(N_TASK), reps))
    t, events = 8.0, []
    for c in order:
        events.append((t, 12.0, int(c)))
        t += 12.0 + rng.uniform(10.0, 14.0)
    return events, t


def make_run(tpl: Template, subj: dict[str, Any], rng: np.random.Generator, duration: float, tr: float,
             events: list[tuple[float, float, int]] | None, cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """Vertex-space signal (V, T) sampled at n * TR, plus latent courses and task regressors."""
    n_fine = int(np.ceil(duration / DT)) + int(32 / DT)
    h = hrf()
    L = np.linalg.cholesky(subj["R"])
    z = L @ rng.standard_normal((N_NET, n_fine))
    z = np.stack([np.convolve(zz, h)[:n_fine] for zz in z])[:, int(32 / DT):]  # drop the HRF burn-in
    z = (z - z.mean(1, keepdims=True)) / z.std(1, keepdims=True)
    T = int(np.floor(duration / tr + 1e-9))
    idx = np.minimum(np.round(np.arange(T) * tr / DT).astype(int), z.shape[1] - 1)
    lat = z[:, idx]
    sig = (subj["fields"].T * cfg["network_amp"]) @ lat
    reg = np.zeros((N_TASK, T))
    if events:
        nf = z.shape[1]
        box = np.zeros((N_TASK, nf))
        for onset, dur, c in events:
            box[c, int(round(onset / DT)):int(round((onset + dur) / DT))] = 1.0
        resp = np.stack([np.convolve(b, h)[:nf] for b in box])
        full = np.convolve(np.ones(int(12.0 / DT)), h).max()
        reg = resp[:, idx] / full
        sig = sig + cfg["a_task"] * (tpl.task_maps.T @ reg)
    return {"signal": sig, "latent": lat, "regressors": reg}


def paint_matrix(A: sp.csr_matrix) -> sp.csr_matrix:
    """Row-normalized A^T: each sampled voxel = weighted mean of the vertices that sample it."""
    P = A.T.tocsr()
    s = np.asarray(P.sum(axis=1)).ravel()
    return sp.diags(np.where(s > 0, 1.0 / np.where(s > 0, s, 1), 0.0)) @ P


def to_volume(signal_v: np.ndarray, Paint: sp.csr_matrix, brain: np.ndarray, rng: np.random.Generator,
              tr: float, cfg: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Voxel intensities 1000 + 10 x (Paint signal + noise) inside brain/cortex, 0 elsewhere.
    Returns (inside voxel indices, (n_inside, T) float32)."""
    cortex = np.diff(Paint.indptr) > 0
    inside = np.flatnonzero(brain.ravel() | cortex)
    sv = (Paint[inside] @ signal_v).astype(np.float32)  # (n_inside, T)
    ssd = float(sv[cortex[inside]].std())
    T = sv.shape[1]
    ar = np.zeros(T)
    e = rng.standard_normal(T)
    for t in range(1, T):
        ar[t] = 0.95 * ar[t - 1] + np.sqrt(1 - 0.95 ** 2) * e[t]
    drift = np.linspace(-1.0, 1.0, T)
    noise = rng.standard_normal((len(inside), T), dtype=np.float32)
    noise *= np.float32(cfg["noise_sd"])
    noise += (cfg["ar_amp"] * ar).astype(np.float32)
    # float64 products rounded once to float32, as (a * drift).astype(float32) but without the
    # (n_inside, T) float64 temporary
    d32 = np.empty_like(noise)
    np.multiply(cfg["drift_amp"] * rng.standard_normal((len(inside), 1)), drift, out=d32, casting="same_kind")
    noise += d32
    del d32
    noise *= np.float32(ssd)
    sv += noise
    sv *= 10.0
    sv += 1000.0
    return inside, sv


def _transpose_blocked(a: np.ndarray, block: int = 512) -> np.ndarray:
    """C-contiguous copy of a.T for a 2-D array, in row blocks that stay in cache (numpy's plain
    transposed copy strides through the whole array)."""
    out = np.empty(a.shape[::-1], dtype=a.dtype)
    for r0 in range(0, a.shape[0], block):
        out[:, r0:r0 + block] = a[r0:r0 + block].T
    return out


def nifti_volume(inside: np.ndarray, values: np.ndarray, shape: tuple[int, int, int]) -> tuple[np.ndarray, float]:
    """(inside voxel C-order indices, (n_inside, T) values) -> (int16 (*shape, T) array, slope) with
    data = round(values / slope) (slope = max |value| / 32000), 0 outside. The array is
    Fortran-contiguous (the NIfTI on-disk order), so nibabel writes each frame with one memcpy."""
    T = values.shape[1]
    slope = float(np.maximum(values.max(), -values.min())) / 32000.0 or 1.0  # == np.abs(values).max()
    q = values / slope
    np.round(q, out=q)
    fidx = fortran_index(inside, shape)
    rows = np.zeros((int(np.prod(shape)), T), dtype=np.int16)  # voxels in Fortran order
    rows[fidx] = q  # float32 -> int16 cast, as astype(np.int16)
    del q
    frames = _transpose_blocked(rows)  # (T, voxels): the file's byte order
    return frames.reshape(T, *shape[::-1]).T, slope


def write_nifti(path: Path, inside: np.ndarray, values: np.ndarray, shape: tuple[int, int, int], affine: np.ndarray,
                tr: float) -> None:
    """int16 NIfTI with scl_slope (max |value| -> 32000), pixdim[4] = TR, gzip-compressed (ISA-L level 1),
    written atomically."""
    import nibabel as nib

    from paperflow.core.io import atomic_path

    data, slope = nifti_volume(inside, values, shape)
    img = nib.Nifti1Image(data, affine)
    img.header.set_slope_inter(slope, 0.0)
    img.header.set_xyzt_units("mm", "sec")
    img.header.set_zooms(tuple(img.header.get_zooms()[:3]) + (tr,))
    # gzip stream by ISA-L (level 1: ~7x faster than zlib level 1, nibabel's default, and smaller);
    # a standard gzip member (no file name, mtime 0) that nibabel/zlib read as any .nii.gz
    from isal import igzip

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh, igzip.IGzipFile(filename="", mode="wb", compresslevel=1, fileobj=fh, mtime=0) as gz:
            img.to_stream(gz)


def participant_table(cohort: str, n: int, seed: int) -> list[dict[str, Any]]:
    """Balanced trait_group and site (independent), age u ~ U(0,1) with tertile bins."""
    rng = np.random.default_rng([seed, COHORT_IDS[cohort], 99])
    group = rng.permutation(np.arange(n) % 2)
    site = rng.permutation(np.arange(n) % len(SITES))
    age = rng.uniform(0, 1, n)
    return [{"participant_id": f"sub-{cohort[:2]}{i:03d}", "trait_group": int(group[i]), "trait_age_u": float(age[i]),
             "trait_age_bin": int(min(2, age[i] * 3)), "site": int(site[i]), "tr": SITES[site[i]]} for i in range(n)]


def generate_cohort(out_dir: str | Path, cohort: str, n_subjects: int, n_runs: int, duration: float, seed: int,
                    cfg: dict[str, Any], surf: Surface, A: sp.csr_matrix, affine: np.ndarray,
                    shape: tuple[int, int, int], brain: np.ndarray, progress=lambda it, desc: it) -> list[dict]:
    """Write one cohort's NIfTI runs, events, truth and participants.tsv into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    valid = np.diff(A.indptr) > 0
    tpl = Template(surf, valid, cfg["design_seed"])
    Paint = paint_matrix(A)
    parts = participant_table(cohort, n_subjects, seed)
    seqs = np.random.SeedSequence([seed, COHORT_IDS[cohort]]).spawn(n_subjects)
    task = "state6" if cohort == "state" else "rest"
    for p, ss in progress(list(zip(parts, seqs)), f"synth {cohort}"):
        rng = np.random.default_rng(ss)
        sid = p["participant_id"]
        subj = subject_design(tpl, rng, p["trait_group"], p["trait_age_u"], cfg)
        fdir = out / sid / "func"
        fdir.mkdir(parents=True, exist_ok=True)
        truth: dict[str, Any] = {"fields": subj["fields"].astype(np.float32), "R": subj["R"], "mu": subj["mu"],
                                 "task_maps": tpl.task_maps.astype(np.float32), "entropy": np.asarray(ss.entropy),
                                 "spawn_key": np.asarray(ss.spawn_key)}
        for r in range(1, n_runs + 1):
            events, dur = block_design(rng, cfg["blocks_per_condition"]) if task == "state6" else (None, duration)
            run = make_run(tpl, subj, rng, dur, p["tr"], events, cfg)
            inside, vals = to_volume(run["signal"], Paint, brain, rng, p["tr"], cfg)
            stem = f"{sid}_task-{task}_run-{r}"
            write_nifti(fdir / f"{stem}_bold.nii.gz", inside, vals, shape, affine, p["tr"])
            truth[f"run{r}_latent"] = run["latent"].astype(np.float32)
            truth[f"run{r}_regressors"] = run["regressors"].astype(np.float32)
            if events:
                with open(fdir / f"{stem}_events.tsv", "w", newline="") as fh:
                    w = csv.writer(fh, delimiter="\t")
                    w.writerow(["onset", "duration", "trial_type"])
                    for onset, d, c in events:
                        w.writerow([f"{onset:.2f}", f"{d:.1f}", c])
        np.savez_compressed(out / sid / f"{sid}_truth.npz", **truth)
    with open(out / "participants.tsv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(parts[0]), delimiter="\t")
        w.writeheader()
        w.writerows(parts)
    return parts


def read_participants(path: str | Path) -> list[dict[str, Any]]:
    with open(path) as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for r in rows:
        for k in ("trait_group", "trait_age_bin", "site"):
            r[k] = int(r[k])
        for k in ("trait_age_u", "tr"):
            r[k] = float(r[k])
    return rows


def read_events(path: str | Path) -> list[tuple[float, float, int]]:
    with open(path) as fh:
        return [(float(r["onset"]), float(r["duration"]), int(r["trial_type"])) for r in csv.DictReader(fh, delimiter="\t")]
