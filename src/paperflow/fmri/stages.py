"""flat-map fMRI: projection operator, synthetic BOLD, CortexMAE pretraining, Brainmarks probes.

Stages (`paperflow fmri <stage>`; rules in rules/fmri.smk): geometry -> synth (per cohort) -> prep (per
cohort, all three spaces) -> pretrain (per run tag) -> embed -> probe (baselines, and per embed tag) -> evaluate
(merges the probe parts) -> scaling -> report. Each
stage is a plain function of its typed parameters (built by `plan.py` from the `fmri:` config) and
explicit paths; heavy libraries (torch, nilearn, datasets) are imported inside the functions.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.fmri import plan

log = logging.getLogger("paperflow.fmri")


class GeometryParams(TypedDict):
    surface: dict[str, Any]
    volume_resolution_mm: int
    flat: dict[str, Any]
    parcel: dict[str, Any]
    volume: dict[str, Any]


class SynthParams(TypedDict):
    """`synth:` minus cohorts/keep_nifti, plus the cohort's size (plan.synth_params)."""

    cohort: str
    subjects: int
    runs: int
    seed: int
    design_seed: int
    duration_s: float
    delta: float
    coupling_jitter: float
    jitter_deg: float
    network_amp: float
    a_task: float
    blocks_per_condition: int
    noise_sd: float
    ar_amp: float
    drift_amp: float
    volume_resolution_mm: int
    surface: dict[str, Any]


class PrepParams(TypedDict, total=False):
    cohort: str
    new_tr: float
    clip_frames: int
    n_val: int  # pretrain cohort only


class TrainParams(TypedDict):
    tag: str
    space: str
    seed: int
    n_subjects: int
    draw: int
    steps: int
    batch_size: int
    base_lr: float
    weight_decay: float
    warmup_frac: float
    mask_ratio: float
    clip_frames: int
    eval_every: int
    val_clips: int
    model: dict[str, Any]


class EmbedParams(TypedDict):
    tag: str
    space: str
    seed: int
    random_init: bool
    mask_ratio: float
    clip_frames: int
    model: dict[str, Any]


class EvalSettings(TypedDict):
    """The `eval:` section: the probes' splits, bootstrap and regularisation grid."""

    seed: int
    state_splits: int
    trait_splits: int
    bootstrap: int
    n_Cs: int
    max_iter: int


class ProbeParams(EvalSettings):
    """`eval:` plus the part probed: an embed tag, or `baselines` (benchmarks.BASELINES)."""

    tag: str


class EvalParams(EvalSettings):
    """`eval:` plus the embed tags whose probe parts the table merges."""

    tags: list[str]


class ReportParams(TypedDict):
    tier: str
    train: dict[str, Any]
    scaling: dict[str, Any]
    synth: dict[str, Any]
    flat: dict[str, Any]
    claims: dict[str, Any]


@stage(plan=plan.geometry_params)
def geometry(params: GeometryParams, *, out: Path) -> dict[str, Any]:
    """Build the flat / parcel / volume projectors (sparse operators) once."""
    from paperflow.core.io import Stage, atomic_path, write_json
    from paperflow.fmri.data import build_geometry

    with Stage("fmri.geometry", params, outputs=[out]) as st:
        with atomic_path(out) as tmp:
            summ = build_geometry(dict(params), tmp)
            write_json(tmp / "geometry.json", summ)
        st.metrics.update({f"{k}_{m}": v[m] for k, v in summ.items() for m in ("D", "n_patches", "n_nonempty_patches")})
    return summ


@stage(plan=plan.synth_params)
def synth(params: SynthParams, *, geometry: Path, out: Path) -> int:
    """Write one synthetic cohort as NIfTI runs (MNI grid) + events + truth."""
    from paperflow.core.memory import retain_freed_memory

    retain_freed_memory()  # run-sized numpy temporaries: reuse freed memory instead of page-faulting it again
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.progress import progress
    from paperflow.fmri.data import synth_cohort

    with Stage("fmri.synth", params, outputs=[out], inputs=[geometry / "grid.npz"], seed=params["seed"]) as st:
        with atomic_path(out) as tmp:
            parts = synth_cohort(dict(params), geometry, tmp, progress)
        st.metrics["subjects"] = len(parts)
        st.metrics["trait_group_balance"] = sum(q["trait_group"] for q in parts) / len(parts)
    return len(parts)


@stage(plan=plan.prep_params)
def prep(params: PrepParams, *, synth: Path, geometry: Path, out: Path) -> dict[str, Any]:
    """Project a cohort into flat / parcel / volume, z-score, resample to 1 s, float16 Arrow."""
    from paperflow.core.memory import retain_freed_memory

    retain_freed_memory()  # run-sized numpy temporaries: reuse freed memory instead of page-faulting it again
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.progress import progress
    from paperflow.fmri.data import load_projectors, prep_cohort

    with Stage("fmri.prep", params, outputs=[out], inputs=[geometry]) as st:
        with atomic_path(out) as tmp:
            stats = prep_cohort(dict(params), synth, load_projectors(geometry), tmp, progress)
        st.metrics.update(stats)
    return stats


def choose_subjects(subjects: list[str], seed: int, n: int, draw: int) -> list[str]:
    """The `draw`-th disjoint draw of `n` training subjects (the first draw when too few are left)."""
    import numpy as np

    subs = sorted(set(subjects))
    perm = np.random.default_rng([seed, n, 5]).permutation(subs)
    if (draw + 1) * n <= len(subs):
        return [str(s) for s in sorted(perm[draw * n:(draw + 1) * n])]
    return [str(s) for s in sorted(perm[:n])]


@stage(plan=plan.train_params)
def pretrain(params: TrainParams, *, geometry: Path, data: Path, out: Path) -> dict[str, Any]:
    """Train the MAE on pretrain-cohort clips of one space (resumable from out/ckpt)."""
    from paperflow.core.io import Stage, write_json
    from paperflow.core.progress import progress
    from paperflow.fmri.data import load_runs
    from paperflow.fmri.geometry import Projector
    from paperflow.fmri.prep import load_splits
    from paperflow.fmri.train import pretrain as train_mae

    p = dict(params)
    proj = Projector.load(geometry / f"{p['space']}.npz")
    chosen = choose_subjects(list(load_splits(data / p["space"])["train"]["subject"]), p["seed"], p["n_subjects"],
                             p["draw"])
    train_runs, _ = load_runs(data, p["space"], "train", chosen)
    val_runs, _ = load_runs(data, p["space"], "validation")
    result = out / "result.json"
    with Stage("fmri.pretrain", p, outputs=[result], inputs=[geometry], seed=p["seed"]) as st:
        res = train_mae(proj, train_runs, val_runs, p, out, progress)
        frames = int(sum(r.shape[0] for r in train_runs))
        summary = {"tag": p["tag"], "space": p["space"], "subjects": chosen, "n_subjects": len(chosen),
                   "frames": frames, **res}
        write_json(result, summary)
        st.metrics.update({k: summary[k] for k in ("best_val_loss", "initial_loss", "val_loss_init", "frames",
                                                   "n_subjects")})
    return summary


@stage(plan=plan.embed_params)
def embed(params: EmbedParams, *, geometry: Path, state: Path, trait: Path, out: Path,
          ckpt: Path | None = None) -> dict[str, Any]:
    """Frozen-encoder features of the state clips and trait runs (`--ckpt` best.safetensors; none: random init)."""
    from paperflow.core.memory import retain_freed_memory

    retain_freed_memory()  # run-sized numpy temporaries: reuse freed memory instead of page-faulting it again
    from paperflow.core.io import Stage, atomic_path
    from paperflow.fmri.geometry import Projector
    from paperflow.fmri.train import embed_features, load_model

    p = dict(params)
    if not p["random_init"] and ckpt is None:
        raise SystemExit(f"embed {p['tag']}: a pretrained tag needs --ckpt")
    proj = Projector.load(geometry / f"{p['space']}.npz")
    weights = None if p["random_init"] else ckpt
    model = load_model(proj, weights, p)
    with Stage("fmri.embed", p, outputs=[out], inputs=[geometry] + ([weights] if weights else []), seed=p["seed"]) as st:
        with atomic_path(out) as tmp:
            m = embed_features(model, proj, state, trait, p, tmp)
        st.metrics.update(m)
    return m


@stage(plan=plan.probe_params)
def probe(params: ProbeParams, *, state: Path, trait: Path, out: Path, embed: Path | None = None) -> dict[str, Any]:
    """One part of the probe table: the baselines (FC, raw, oracle, chance; tag `baselines`) or one
    frozen-MAE feature file (`--embed embed/<tag>.npz`). Parts run as soon as their inputs exist."""
    from paperflow.core.io import Stage, write_json
    from paperflow.fmri.benchmarks import BASELINES, baseline_probes, feature_probes

    p = dict(params)
    settings = {k: v for k, v in p.items() if k != "tag"}
    if p["tag"] == BASELINES:
        if embed is not None:
            raise SystemExit("probe baselines: takes no --embed")
        inputs = [state, trait]
    else:
        if embed is None or Path(embed).name != f"{p['tag']}.npz":
            raise SystemExit(f"probe {p['tag']}: needs --embed .../{p['tag']}.npz")
        inputs = [embed]
    with Stage("fmri.probe", p, outputs=[out], inputs=inputs, seed=p["seed"]) as st:
        res = baseline_probes(settings, state, trait) if p["tag"] == BASELINES else feature_probes(settings, embed, state, trait)
        write_json(out, {"tag": p["tag"], "settings": settings, "result": res})
        st.metrics.update({f"{t}/{k}": v["mean"] for t, d in res["tasks"].items() for k, v in d.items()})
    return res


@stage(plan=plan.eval_params)
def evaluate(params: EvalParams, *, parts: list[Path], out: Path) -> dict[str, Any]:
    """The probe table (metrics.json): the baselines part and one part per embed tag in `tags`, each
    written by `probe` with these settings (a part with other settings or a missing tag is an error)."""
    from paperflow.core.io import Stage, read_json, write_json
    from paperflow.fmri.benchmarks import BASELINES, merge_probes

    p = dict(params)
    settings = {k: v for k, v in p.items() if k != "tags"}
    got = {}
    for f in parts:
        d = read_json(f)
        if d["settings"] != settings:
            raise SystemExit(f"{f}: probed with {d['settings']}, not {settings}")
        got[d["tag"]] = d["result"]
    want = [BASELINES, *p["tags"]]
    if sorted(got) != sorted(want):
        raise SystemExit(f"evaluate: parts {sorted(got)} != {sorted(want)}")
    with Stage("fmri.evaluate", params, outputs=[out], inputs=list(parts), seed=params["seed"]) as st:
        res = merge_probes(got[BASELINES], [got[t] for t in p["tags"]])
        write_json(out, res)
        st.metrics.update({f"{t}/{k}": v["mean"] for t, d in res["tasks"].items() for k, v in d.items() if "mean" in v})
    return res


@stage()
def scaling(*, runs: list[Path], out: Path) -> dict[str, Any]:
    """Validation loss vs pretraining data: points, power-law fits (3-point, log-log with CI), curve."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.fmri.scaling import scaling_outputs

    with Stage("fmri.scaling", {"runs": [str(r) for r in runs]}, outputs=[out], inputs=runs) as st:
        with atomic_path(out) as tmp:
            m = scaling_outputs(runs, tmp)
        st.metrics.update(m)
    return m


@stage(plan=plan.report_params)
def report(params: ReportParams, *, geometry: Path, metrics: Path, state: Path, summary: Path, figdir: Path,
           scaling: Path | None = None, pretrain: list[Path] | None = None, prep: list[Path] | None = None) -> list:
    """Figures + results/fmri/summary.md (claims judged against `fmri.claims.*`)."""
    from paperflow.fmri.report import make_report

    return make_report(dict(params), geometry=geometry, metrics=metrics, scaling=scaling, pretrain=list(pretrain or []),
                       prep=list(prep or []), state=state, summary=summary, figdir=figdir)
