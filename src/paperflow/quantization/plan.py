"""Paths and job parameters: pure functions of the validated config, used by the rules and by the
CLI (`--config`), so a changed parameter reruns exactly the jobs that depend on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.lm.paths import smollm2_dir, stdlib_corpus_dir

ACTS = ("a16", "a8", "a4", "a4lac", "a4mp", "a6mp", "a4mp_beta0")
LAC_ACTS = {"a4lac", "a4mp", "a6mp", "a4mp_beta0"}
MP_ACTS = {"a4mp": 4, "a6mp": 6, "a4mp_beta0": 4}


# ------------------------------------------------------------------ paths
def model_dir(config: Mapping[str, Any]) -> str:
    m = config["quantization"]["model"]
    if m["source"] == "smollm2":
        return smollm2_dir(config)
    if m["source"] == "tiny":
        return f"{config['models_dir']}/quantization/tiny-lm"
    if not m.get("path"):
        raise ValueError("quantization.model.source = path needs quantization.model.path")
    return m["path"]


def corpus_dir(config: Mapping[str, Any]) -> str:
    c = config["quantization"]["corpus"]
    if c["source"] == "stdlib":
        return stdlib_corpus_dir(config)
    if not c.get("dir"):
        raise ValueError("quantization.corpus.source = dir needs quantization.corpus.dir")
    return c["dir"]


def paths(config: Mapping[str, Any]) -> dict[str, str]:
    res = f"{config['results_dir']}/quantization"
    mod = f"{config['models_dir']}/quantization"
    return {
        "tokens": f"{config['data_dir']}/quantization/tokens.safetensors",
        "kotms": f"{mod}/kotms.safetensors",
        "sens": f"{res}/sens.json",
        "qdir": mod + "/s{seed}/{method}",
        "lac": res + "/s{seed}/lac/{method}.json",
        "eval": res + "/s{seed}/eval/{method}/{act}.json",
        "metrics": f"{res}/metrics.json",
        "figure": f"{res}/ppl.png",
        "summary": f"{res}/summary.md",
    }


def split_run(run: str) -> tuple[str, str]:
    method, act = run.split("/")
    return method, act


def needs_kotms(q: Mapping[str, Any], method: str) -> bool:
    m = q["methods"][method]
    return m["quantizer"] == "twla" or (m["quantizer"] == "rotation_only" and m.get("rotation") == "kotms")


def eval_targets(config: Mapping[str, Any]) -> list[str]:
    q = config["quantization"]
    p = paths(config)
    out = []
    for seed in q["seeds"]:
        for run in q["runs"]:
            method, act = split_run(run)
            if method not in q["methods"]:
                raise ValueError(f"quantization.runs: {run!r} names unknown method {method!r}")
            out.append(p["eval"].format(seed=seed, method=method, act=act))
    return out


# ------------------------------------------------------------------ job parameters
def tiny_params(q: Mapping[str, Any]) -> dict:
    return dict(q["tiny"])


def data_params(q: Mapping[str, Any]) -> dict:
    return {"corpus_format": q["corpus"]["format"] if q["corpus"]["source"] == "dir" else "wikitext_raw",
            "model_source": q["model"]["source"], "model_path": q["model"]["path"]}


def _windows(q: Mapping[str, Any]) -> dict:
    d = q["data"]
    return {k: d[k] for k in ("seq_len", "calib_windows", "lac_windows", "sens_windows", "check_windows",
                              "test_windows", "batch")}


def kotms_params(q: Mapping[str, Any]) -> dict:
    return dict(q["kotms"])


def sens_params(q: Mapping[str, Any]) -> dict:
    return {"data": _windows(q), "ilaamp": {"bits": q["ilaamp"]["bits"], "base_bits": q["ilaamp"]["base_bits"]},
            "clip": q["act"]["default_clip"]}


def weights_params(q: Mapping[str, Any], method: str, seed: int) -> dict:
    return {"method": method, "options": dict(q["methods"][method]), "e2m": dict(q["e2m"]), "data": _windows(q),
            "batch": q["data"]["batch"], "seed": int(seed)}


def lac_params(q: Mapping[str, Any], seed: int) -> dict:
    return {"bits": q["ilaamp"]["bits"], "grid": q["act"]["lac_grid"], "data": _windows(q), "seed": int(seed)}


def eval_params(q: Mapping[str, Any], method: str, act: str) -> dict:
    p = {"method": method, "act": act, "clip": q["act"]["default_clip"], "data": _windows(q)}
    if act in MP_ACTS:
        p["ilaamp"] = {"bits": q["ilaamp"]["bits"], "avg_bits": MP_ACTS[act],
                       "beta": 0.0 if act == "a4mp_beta0" else q["ilaamp"]["beta"]}
    if q["zeroshot"]["enabled"]:
        p["zeroshot"] = {k: v for k, v in q["zeroshot"].items() if k != "enabled"}
    return p


def report_params(q: Mapping[str, Any]) -> dict:
    return {"seeds": q["seeds"], "runs": q["runs"], "methods": q["methods"], "model": q["model"],
            "corpus": q["corpus"], "data": _windows(q), "kotms": q["kotms"], "e2m": q["e2m"]}


# ------------------------------------------------------------------ rule input helpers
# (kept here, not in rules/quantization.smk, so the Snakefile stays lint-clean: rules only)
def qdir_inputs(config: Mapping[str, Any], method: str, seed: Any) -> list[str]:
    """The packed-model directory a (method, seed) evaluation needs ([] for the FP model)."""
    q = config["quantization"]
    if q["methods"][method]["quantizer"] == "fp":
        return []
    return [paths(config)["qdir"].format(seed=seed, method=method)]


def eval_inputs(config: Mapping[str, Any], w: Any) -> dict[str, str]:
    p = paths(config)
    ins = {"tokens": p["tokens"], "model": model_dir(config)}
    q = qdir_inputs(config, w.method, w.seed)
    if q:
        ins["qdir"] = q[0]
    if w.act in LAC_ACTS:
        ins["lac"] = p["lac"].format(seed=w.seed, method=w.method)
    if w.act in MP_ACTS:
        ins["sens"] = p["sens"]
    return ins


def opt_flag(flag: str, key: str):
    """A params function giving `--flag <input[key]>` when that input exists, else ''."""
    return lambda w, input: f"--{flag} {input[key]}" if key in input.keys() else ""


def unlearning_model_dir(config: Mapping[str, Any], model: str, seed: Any) -> str:
    """An unlearning checkpoint dir, as documented in src/paperflow/unlearning/README.md."""
    from paperflow.unlearning import plan as ulp

    u = config["unlearning"]
    return f"{config['models_dir']}/unlearning/{u['run_name']}/seed{ulp.model_seed(u, model, int(seed))}/{model}"
