"""noisy-label cross-modal hashing: label-noise injection with verifiable records, RFCMH and baselines.

Each stage is a plain function with explicit paths and a typed parameters object; `paperflow hashing
<stage>` is generated from it by `paperflow.core.cli`. Rules pass `--params JSON`; by hand, pass
`--config FILE` plus the job's coordinates (`--dataset --method --bits --mode --rate --seed`) and the
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


class NoiseParams(TypedDict):
    mode: str
    rate: float
    seed: int


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


class EvalParams(TypedDict):
    bits: int
    selections: list[str]


class ChanceParams(TypedDict):
    bits: int
    draws: int
    seed: int


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
def noise(params: NoiseParams, *, split_file: Path, out: Path, sidecar: Path) -> dict[str, Any]:
    """inject label noise into one split; write noisy labels + flip record (.npz + .json)"""
    import numpy as np

    from paperflow.core.io import Stage
    from paperflow.hashing.noise import make_record, verify_record, write_record

    with Stage("hashing.noise", config=params, outputs=[out, sidecar], inputs=[split_file],
               seed=params["seed"]) as st:
        with np.load(split_file, allow_pickle=False) as z:
            clean = z["labels"]
        arrays, side = make_record(clean, params["rate"], params["mode"], params["seed"])
        write_record(out, sidecar, arrays, side)
        verify_record(out, side)
        st.metrics.update({k: side[k] for k in ("n_picked", "n_changed", "realized_rate", "entry_flip_rate")})
    return side


@stage(plan=plan.train_params)
def train(params: TrainParams, *, train: Path, val: Path, noise_train: Path, noise_val: Path, out: Path,
          log_jsonl: Path, ckpt_dir: Path | None = None) -> dict[str, Any] | None:
    """train one run (accelerate-aware; rank 0 writes); labels only from noise records; resumes from --ckpt-dir"""
    from paperflow.core.io import Stage
    from paperflow.hashing.train import train_run

    metrics = train_run(params, train, val, noise_train, noise_val, out, log_jsonl, ckpt_dir=ckpt_dir)
    if metrics is None:  # not the main process
        return None
    with Stage("hashing.train", config=params, outputs=[out], inputs=[train, val, noise_train, noise_val],
               seed=params["train_seed"]) as st:
        st.metrics.update(metrics)
    return metrics


@stage(plan=plan.eval_params)
def quantize(params: EvalParams, *, weights: Path, query: Path, database: Path, out: Path) -> None:
    """sign codes (packed bits) of the query/database splits for each selection rule"""
    import numpy as np

    from paperflow.core.io import Stage, atomic_path
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import to_bits
    from paperflow.hashing.model import numpy_forward

    with Stage("hashing.quantize", config=params, outputs=[out], inputs=[weights, query, database]):
        q = load_split(query, with_labels=False)
        d = load_split(database, with_labels=False)
        with np.load(weights, allow_pickle=False) as z:
            allw = {k: z[k] for k in z.files}
        codes: dict[str, Any] = {}
        for sel in params["selections"]:
            w = {k.split("/", 1)[1]: v for k, v in allw.items() if k.startswith(sel + "/")}
            codes[f"{sel}/q_img"] = to_bits(numpy_forward(w, "img", q["img"]))
            codes[f"{sel}/q_txt"] = to_bits(numpy_forward(w, "txt", q["txt"]))
            codes[f"{sel}/db_img"] = to_bits(numpy_forward(w, "img", d["img"]))
            codes[f"{sel}/db_txt"] = to_bits(numpy_forward(w, "txt", d["txt"]))
            if codes[f"{sel}/q_img"].shape[1] * 8 != params["bits"]:
                raise ValueError(f"{weights}: {sel} codes are not {params['bits']} bits")
        with atomic_path(out) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **codes)


@stage(plan=plan.eval_params)
def evaluate(params: EvalParams, *, codes: Path, weights_manifest: Path, query: Path, database: Path,
             out: Path) -> dict[str, Any]:
    """mAP@all (I2T, T2I) of one run's codes; the only stage that reads test labels"""
    import numpy as np

    from paperflow.core.io import Stage, read_json, write_json
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import both_directions

    with Stage("hashing.evaluate", config=params, outputs=[out], inputs=[codes, query, database]) as st:
        ql = load_split(query)["labels"]
        dl = load_split(database)["labels"]
        man = read_json(weights_manifest)
        with np.load(codes, allow_pickle=False) as z:
            c_all = {k: z[k] for k in z.files}
        res: dict[str, Any] = {"train_params": man["config"], "selections": {}}
        for sel in params["selections"]:
            c = {k.split("/", 1)[1]: v for k, v in c_all.items() if k.startswith(sel + "/")}
            m = both_directions(c, ql, dl, params["bits"])
            res["selections"][sel] = {**m, **man["metrics"]["selected"][sel]}
            st.metrics[sel] = m
        res["diagnostics"] = {k: v for k, v in man["metrics"].items() if k != "selected"}
        write_json(out, res)
    return res


@stage(plan=plan.chance_params)
def chance(params: ChanceParams, *, query: Path, database: Path, out: Path) -> dict[str, Any]:
    """mAP@all of random codes on one dataset's query/database at one code length (the chance baseline)"""
    from paperflow.core.io import Stage, write_json
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import random_code_map

    with Stage("hashing.chance", config=params, outputs=[out], inputs=[query, database], seed=params["seed"]) as st:
        ql = load_split(query)["labels"]
        dl = load_split(database)["labels"]
        res = random_code_map(ql, dl, params["bits"], params["draws"], params["seed"])
        write_json(out, res)
        st.metrics.update({k: res[k] for k in ("mean", "max", "n_query", "n_database")})
    return res


@stage(plan=plan.report_params)
def report(params: ReportParams, *, evals: list[Path], noise_sidecars: list[Path] = [],  # noqa: B006
           chance: list[Path] = [], outdir: Path) -> None:  # noqa: B006
    """metrics.json, mAP-vs-noise figures and summary.md (claims judged by core.verdict) from every run's evaluation"""
    from paperflow.hashing.report import build_report

    build_report(params, evals, noise_sidecars, Path(outdir), chance)
