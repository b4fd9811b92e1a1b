"""`paperflow hashing <stage>`: synth -> prep -> noise -> train -> quantize -> evaluate -> report.

Rules pass `--params JSON`; by hand, pass `--config FILE` plus the run's coordinates
(`--dataset --method --bits --mode --rate --seed`) and the same planning functions derive them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from paperflow.core.cli import Study, add_config_args, job_params

study = Study("hashing", "noisy-label cross-modal hashing: noise injection, RFCMH and baselines")
STUDIES = [study]


def _coords(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run coordinates (only without --params)")
    g.add_argument("--dataset", default="synth")
    g.add_argument("--method")
    g.add_argument("--bits")
    g.add_argument("--mode", default="sym")
    g.add_argument("--rate", default="0")
    g.add_argument("--seed", default="10")


@study.stage("synth", "generate a synthetic feature pack (.mat) in an official key layout")
def _synth(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage
        from paperflow.hashing import plan
        from paperflow.hashing.data import write_synthetic_mat

        prm = job_params(a, "hashing", lambda c: plan.synth_params(c, a.dataset))
        with Stage("hashing.synth", config=prm, outputs=[a.out], seed=prm["synthetic"]["seed"]) as st:
            arrays = write_synthetic_mat(a.out, prm["format"], prm["synthetic"])
            st.metrics["keys"] = {k: list(v.shape) for k, v in arrays.items()}

    return run


@study.stage("prep", "read a feature pack (.mat) into canonical train/val/query/database .npz + meta.json")
def _prep(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--pack", required=True, help=".mat feature pack")
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage, write_json
        from paperflow.hashing import plan
        from paperflow.hashing.data import SPLITS, load_pack, save_split

        prm = job_params(a, "hashing", lambda c: plan.prep_params(c, a.dataset))
        out = Path(a.outdir)
        outs = [out / f"{s}.npz" for s in SPLITS] + [out / "meta.json"]
        with Stage("hashing.prep", config=prm, outputs=outs, inputs=[a.pack]) as st:
            splits, meta = load_pack(a.pack, prm["format"], prm["n_train_ml"], prm["n_val_ml"], prm["split_seed"])
            for s in SPLITS:
                save_split(out / f"{s}.npz", splits[s])
            write_json(out / "meta.json", meta)
            st.metrics.update(sizes=meta["sizes"], n_classes=meta["n_classes"])

    return run


@study.stage("noise", "inject label noise into one split; write noisy labels + flip record (.npz + .json)")
def _noise(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--split-file", required=True, help="canonical split .npz (clean labels)")
    p.add_argument("--out", required=True, help="record .npz")
    p.add_argument("--sidecar", required=True, help="record .json")

    def run(a: argparse.Namespace) -> None:
        import numpy as np

        from paperflow.core.io import Stage
        from paperflow.hashing import plan
        from paperflow.hashing.noise import make_record, verify_record, write_record

        prm = job_params(a, "hashing", lambda c: plan.noise_params(c, a.mode, a.rate, a.seed))
        with Stage("hashing.noise", config=prm, outputs=[a.out, a.sidecar], inputs=[a.split_file],
                   seed=prm["seed"]) as st:
            with np.load(a.split_file, allow_pickle=False) as z:
                clean = z["labels"]
            arrays, side = make_record(clean, prm["rate"], prm["mode"], prm["seed"])
            write_record(a.out, a.sidecar, arrays, side)
            verify_record(a.out, side)
            st.metrics.update({k: side[k] for k in ("n_picked", "n_changed", "realized_rate", "entry_flip_rate")})

    return run


@study.stage("train", "train one run (accelerate-aware; rank 0 writes); labels only from noise records")
def _train(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--train", required=True, help="train split .npz (its clean labels are not read)")
    p.add_argument("--val", required=True, help="val split .npz")
    p.add_argument("--noise-train", required=True, help="train noise record .npz")
    p.add_argument("--noise-val", required=True, help="val noise record .npz")
    p.add_argument("--out", required=True, help="weights .npz (per selection rule)")
    p.add_argument("--log-jsonl", required=True, help="per-epoch log")

    def run(a: argparse.Namespace) -> None:
        from paperflow.core.io import Stage
        from paperflow.hashing import plan
        from paperflow.hashing.train import train_run

        prm = job_params(a, "hashing", lambda c: plan.train_params(c, a.dataset, a.method, a.bits, a.mode, a.rate,
                                                                   a.seed))
        inputs = [a.train, a.val, a.noise_train, a.noise_val]
        metrics = train_run(prm, a.train, a.val, a.noise_train, a.noise_val, a.out, a.log_jsonl)
        if metrics is None:  # not the main process
            return
        with Stage("hashing.train", config=prm, outputs=[a.out], inputs=inputs, seed=prm["train_seed"]) as st:
            st.metrics.update(metrics)

    return run


@study.stage("quantize", "sign codes (packed bits) of the query/database splits for each selection rule")
def _quantize(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--query", required=True)
    p.add_argument("--database", required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import numpy as np

        from paperflow.core.io import Stage, atomic_path
        from paperflow.hashing import plan
        from paperflow.hashing.data import load_split
        from paperflow.hashing.evaluate import to_bits
        from paperflow.hashing.model import numpy_forward

        prm = job_params(a, "hashing", lambda c: plan.eval_params(c, a.bits))
        with Stage("hashing.quantize", config=prm, outputs=[a.out], inputs=[a.weights, a.query, a.database]):
            q = load_split(a.query, with_labels=False)
            d = load_split(a.database, with_labels=False)
            with np.load(a.weights, allow_pickle=False) as z:
                allw = {k: z[k] for k in z.files}
            codes: dict[str, Any] = {}
            for sel in prm["selections"]:
                w = {k.split("/", 1)[1]: v for k, v in allw.items() if k.startswith(sel + "/")}
                codes[f"{sel}/q_img"] = to_bits(numpy_forward(w, "img", q["img"]))
                codes[f"{sel}/q_txt"] = to_bits(numpy_forward(w, "txt", q["txt"]))
                codes[f"{sel}/db_img"] = to_bits(numpy_forward(w, "img", d["img"]))
                codes[f"{sel}/db_txt"] = to_bits(numpy_forward(w, "txt", d["txt"]))
                if codes[f"{sel}/q_img"].shape[1] * 8 != prm["bits"]:
                    raise ValueError(f"{a.weights}: {sel} codes are not {prm['bits']} bits")
            with atomic_path(a.out) as tmp:
                with open(tmp, "wb") as fh:
                    np.savez(fh, **codes)

    return run


@study.stage("evaluate", "mAP@all (I2T, T2I) of one run's codes; the only stage that reads test labels")
def _evaluate(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    _coords(p)
    p.add_argument("--codes", required=True)
    p.add_argument("--weights-manifest", required=True, help="train manifest (selected epoch, ε)")
    p.add_argument("--query", required=True)
    p.add_argument("--database", required=True)
    p.add_argument("--out", required=True)

    def run(a: argparse.Namespace) -> None:
        import numpy as np

        from paperflow.core.io import Stage, read_json, write_json
        from paperflow.hashing import plan
        from paperflow.hashing.data import load_split
        from paperflow.hashing.evaluate import both_directions

        prm = job_params(a, "hashing", lambda c: plan.eval_params(c, a.bits))
        with Stage("hashing.evaluate", config=prm, outputs=[a.out],
                   inputs=[a.codes, a.query, a.database]) as st:
            ql = load_split(a.query)["labels"]
            dl = load_split(a.database)["labels"]
            man = read_json(a.weights_manifest)
            with np.load(a.codes, allow_pickle=False) as z:
                codes = {k: z[k] for k in z.files}
            res: dict[str, Any] = {"train_params": man["config"], "selections": {}}
            for sel in prm["selections"]:
                c = {k.split("/", 1)[1]: v for k, v in codes.items() if k.startswith(sel + "/")}
                m = both_directions(c, ql, dl, prm["bits"])
                res["selections"][sel] = {**m, **man["metrics"]["selected"][sel]}
                st.metrics[sel] = m
            res["diagnostics"] = {k: v for k, v in man["metrics"].items() if k != "selected"}
            write_json(a.out, res)

    return run


@study.stage("report", "metrics.json, mAP-vs-noise figures and summary.md from every run's evaluation")
def _report(p: argparse.ArgumentParser):  # type: ignore[no-untyped-def]
    add_config_args(p)
    p.add_argument("--evals", nargs="+", required=True)
    p.add_argument("--noise-sidecars", nargs="*", default=[])
    p.add_argument("--outdir", required=True)

    def run(a: argparse.Namespace) -> None:
        from paperflow.hashing import plan
        from paperflow.hashing.report import build_report

        prm = job_params(a, "hashing", plan.report_params)
        build_report(prm, a.evals, a.noise_sidecars, Path(a.outdir))

    return run


