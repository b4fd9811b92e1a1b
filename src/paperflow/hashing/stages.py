"""noisy-label cross-modal hashing: label-noise injection with verifiable records, RFCMH and baselines.

Each stage is a plain function with explicit paths and a typed parameters object; `paperflow hashing
<stage>` is generated from it by `paperflow.core.cli`. Rules pass `--params JSON`; by hand, pass
`--config FILE` plus the job's coordinates (`--dataset --method --bits --mode --rate [--seed]`) and the
same planning functions (`plan.py`) derive the parameters. Spec: specs/hashing.md.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.hashing import plan

log = logging.getLogger(__name__)


class SynthParams(TypedDict):
    format: str
    synthetic: dict[str, Any]


class PrepParams(TypedDict):
    format: str
    n_train_ml: int
    n_val_ml: int
    split_seed: int


class NoiseRecord(TypedDict):
    name: str
    split: str
    mode: str
    rate: float
    seed: int


class NoiseParams(TypedDict):
    records: list[NoiseRecord]


class TrainParams(TypedDict):
    method: str
    bits: int
    mode: str
    rate: float
    seed: int
    val_seed: int
    train_seed: int
    multilabel: bool
    train: dict[str, Any]
    method_params: dict[str, Any]


class TrainJobParams(TypedDict):
    cells: list[TrainParams]


class ChanceParams(TypedDict):
    bits: int
    draws: int
    seed: int


class EvalParams(TypedDict):
    bits: int
    selections: list[str]
    runs: list[str]
    chance: ChanceParams


class ReportParams(TypedDict):
    runs: list[dict[str, Any]]
    primary_selection: str
    selections: list[str]
    datasets: dict[str, dict[str, Any]]
    roles: dict[str, str]
    claims: dict[str, Any]


@stage(plan=plan.synth_params)
def synth(params: SynthParams, *, out: Path) -> None:
    """generate a synthetic feature pack (.mat) in an official key layout"""
    from paperflow.core.io import Stage
    from paperflow.hashing.data import write_synthetic_mat

    with Stage("hashing.synth", config=params, outputs=[out], seed=params["synthetic"]["seed"]) as st:
        arrays = write_synthetic_mat(out, params["format"], params["synthetic"])
        st.metrics["keys"] = {k: list(v.shape) for k, v in arrays.items()}


@stage(plan=plan.prep_params)
def prep(params: PrepParams, *, pack: Path, outdir: Path) -> None:
    """read a feature pack (.mat) into canonical train/val/query/database .npz + meta.json"""
    from paperflow.core.io import Stage, write_json
    from paperflow.hashing.data import SPLITS, load_pack, save_split

    outs = [outdir / f"{s}.npz" for s in SPLITS] + [outdir / "meta.json"]
    with Stage("hashing.prep", config=params, outputs=outs, inputs=[pack]) as st:
        splits, meta = load_pack(pack, params["format"], params["n_train_ml"], params["n_val_ml"],
                                 params["split_seed"])
        for s in SPLITS:
            save_split(outdir / f"{s}.npz", splits[s])
        write_json(outdir / "meta.json", meta)
        st.metrics.update(sizes=meta["sizes"], n_classes=meta["n_classes"])


@stage(plan=plan.noise_params)
def noise(params: NoiseParams, *, split_dir: Path, outdir: Path) -> list[dict[str, Any]]:
    """inject label noise: every record one dataset's runs need (noisy labels + flip record, .npz + .json each)"""
    import numpy as np

    from paperflow.core.io import Stage
    from paperflow.hashing.noise import make_record, verify_record, write_record

    sides = []
    for r in params["records"]:
        split_file = split_dir / f"{r['split']}.npz"
        out, sidecar = outdir / f"{r['name']}.npz", outdir / f"{r['name']}.json"
        cfg = {"mode": r["mode"], "rate": float(r["rate"]), "seed": int(r["seed"])}
        with Stage("hashing.noise", config=cfg, outputs=[out, sidecar], inputs=[split_file], seed=cfg["seed"]) as st:
            with np.load(split_file, allow_pickle=False) as z:
                clean = z["labels"]
            arrays, side = make_record(clean, cfg["rate"], cfg["mode"], cfg["seed"])
            write_record(out, sidecar, arrays, side)
            verify_record(out, side)
            st.metrics.update({k: side[k] for k in ("n_picked", "n_changed", "realized_rate", "entry_flip_rate")})
        sides.append(side)
    return sides


@stage(plan=plan.train_job_params)
def train(params: TrainJobParams, *, train: Path, val: Path, noise_train: list[Path], noise_val: list[Path],
          out: list[Path], log_jsonl: list[Path], ckpt_dir: list[Path] = [],  # noqa: B006
          stop_after: int | None = None) -> list[dict[str, Any]] | None:
    """train the runs of one job (a noise setting's seeds, or one run) in one process; accelerate-aware (rank 0 writes); labels only from noise records; resumable"""
    from paperflow.core.io import Stage
    from paperflow.hashing.train import train_job

    cells = params["cells"]

    def manifest(i: int, metrics: dict[str, Any]) -> None:  # one manifest per run, as a one-run job writes it
        with Stage("hashing.train", config=cells[i], outputs=[out[i]], inputs=[train, val, noise_train[i], noise_val[i]],
                   seed=cells[i]["train_seed"]) as st:
            st.metrics.update(metrics)

    return train_job(cells, train, val, noise_train, noise_val, out, log_jsonl, ckpt_dirs=ckpt_dir or None,
                     stop_after=stop_after, on_done=manifest)


@stage(plan=plan.eval_params)
def score(params: EvalParams, *, weights: list[Path], query: Path, database: Path, out: Path, codes: Path,
             chance: Path) -> dict[str, Any]:
    """codes (packed sign bits) and mAP@all (I2T, T2I) of every run of one code length, and the chance level; the only stage that reads test labels"""
    import numpy as np

    from paperflow.core.io import Stage, atomic_path, read_json, write_json
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import both_directions, random_code_map, to_bits
    from paperflow.hashing.model import numpy_forward

    bits, runs = params["bits"], params["runs"]
    if len(weights) != len(runs):
        raise ValueError(f"{len(runs)} runs but {len(weights)} weights files")
    with Stage("hashing.score", config=params, outputs=[out, codes, chance],
               inputs=[*weights, query, database]) as st:
        q, d = load_split(query), load_split(database)
        ql, dl = q["labels"], d["labels"]
        all_codes: dict[str, Any] = {}
        cells = []
        for run, wf in zip(runs, weights, strict=True):
            if wf.parent.name != run:
                raise ValueError(f"{wf} is not the weights of run {run}")
            man = read_json(Path(f"{wf}.manifest.json"))
            with np.load(wf, allow_pickle=False) as z:
                allw = {k: z[k] for k in z.files}
            cell: dict[str, Any] = {"run": run, "train_params": man["config"], "selections": {}}
            for sel in params["selections"]:
                w = {k.split("/", 1)[1]: v for k, v in allw.items() if k.startswith(sel + "/")}
                c = {"q_img": to_bits(numpy_forward(w, "img", q["img"])), "q_txt": to_bits(numpy_forward(w, "txt", q["txt"])),
                     "db_img": to_bits(numpy_forward(w, "img", d["img"])), "db_txt": to_bits(numpy_forward(w, "txt", d["txt"]))}
                if c["q_img"].shape[1] * 8 != bits:
                    raise ValueError(f"{wf}: {sel} codes are not {bits} bits")
                all_codes.update({f"{run}/{sel}/{k}": v for k, v in c.items()})
                m = both_directions(c, ql, dl, bits)
                cell["selections"][sel] = {**m, **man["metrics"]["selected"][sel]}
            cell["diagnostics"] = {k: v for k, v in man["metrics"].items() if k != "selected"}
            cells.append(cell)
            st.metrics[run] = {s: {k: cell["selections"][s][k] for k in ("i2t", "t2i")} for s in params["selections"]}
        with atomic_path(codes) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **all_codes)
        res = {"bits": bits, "cells": cells}
        write_json(out, res)
        cp = params["chance"]
        ch = random_code_map(ql, dl, cp["bits"], cp["draws"], cp["seed"])
        write_json(chance, ch)
        st.metrics["chance"] = {k: ch[k] for k in ("mean", "max", "n_query", "n_database")}
    return res


@stage(plan=plan.report_params)
def report(params: ReportParams, *, evals: list[Path], noise_sidecars: list[Path] = [],  # noqa: B006
           chance: list[Path] = [], outdir: Path) -> None:  # noqa: B006
    """metrics.json, mAP-vs-noise figures and summary.md (claims judged by core.verdict) from every run's evaluation"""
    from paperflow.hashing.report import build_report

    build_report(params, evals, noise_sidecars, Path(outdir), chance)
