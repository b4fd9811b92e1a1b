"""Paths and job parameters: pure functions of the validated config, used by the rules (`--params`)
and by the generated CLI (`--config` + the plan function's coordinates, e.g. `--method --seed`), so a
changed parameter reruns exactly the jobs that depend on it.

Facts about a weight method (its options and defaults, whether it needs KOTMS, whether it writes a
packed model) live in its file under `methods/`; facts about an activation setting live in `ACTS`.
The unlearning study's outputs are located only through `paperflow.unlearning.paths`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.lm.paths import smollm2_dir, stdlib_corpus_dir
from paperflow.quantization import methods
from paperflow.unlearning import paths as ul_paths

# Activation settings (`runs: [<method>/<act>]`): `bits` = uniform per-token bit-width, `avg_bits` =
# ILA-AMP mixed precision with that average budget, `lac` = LAC clips (else the default clip),
# `beta` overrides ilaamp.beta (the β = 0 ablation).
ACTS: dict[str, dict[str, Any]] = {
    "a16": {"bits": 16, "lac": False},
    "a8": {"bits": 8, "lac": False},
    "a4": {"bits": 4, "lac": False},
    "a4lac": {"bits": 4, "lac": True},
    "a4mp": {"avg_bits": 4, "lac": True},
    "a6mp": {"avg_bits": 6, "lac": True},
    "a4mp_beta0": {"avg_bits": 4, "lac": True, "beta": 0.0},
}


def is_mp(act: str) -> bool:
    return "avg_bits" in ACTS[act]


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
        "kotms_log": f"{mod}/kotms_log.json",
        "sens": f"{res}/sens.json",
        "qdir": mod + "/s{seed}/{method}",
        "lac": res + "/s{seed}/lac/{method}.json",
        "eval": res + "/s{seed}/eval/{method}/{act}.json",
        "metrics": f"{res}/metrics.json",
        "figure": f"{res}/ppl.png",
        "summary": f"{res}/summary.md",
        # cross-study (unlearning checkpoints)
        "ul_qdir": f"{mod}/unlearning/{{run}}/seed{{useed}}/{{umodel}}__{{scheme}}",
        "ul_eval": f"{res}/unlearning/{{run}}/seed{{useed}}/{{umodel}}__{{scheme}}/metrics.json",
        "ul_json": f"{res}/unlearning_leak.json",
        "ul_figure": f"{res}/unlearning_leak.png",
    }


def split_run(run: str) -> tuple[str, str]:
    method, act = run.split("/")
    return method, act


def needs_kotms(q: Mapping[str, Any], method: str) -> bool:
    return methods.needs_kotms(q["methods"][method])


def any_needs_kotms(q: Mapping[str, Any]) -> bool:
    return any(needs_kotms(q, split_run(r)[0]) for r in q["runs"])


def any_mp(q: Mapping[str, Any]) -> bool:
    return any(is_mp(split_run(r)[1]) for r in q["runs"])


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
    return {"method": method, "options": methods.resolve(q["methods"][method]), "e2m": dict(q["e2m"]),
            "data": _windows(q), "batch": q["data"]["batch"], "seed": int(seed)}


def lac_params(q: Mapping[str, Any], seed: int) -> dict:
    return {"bits": q["ilaamp"]["bits"], "grid": q["act"]["lac_grid"], "data": _windows(q), "seed": int(seed)}


def eval_params(q: Mapping[str, Any], method: str, act: str, seed: int) -> dict:
    a = ACTS[act]
    p = {"method": method, "act": act, "seed": int(seed), "clip": q["act"]["default_clip"], "data": _windows(q),
         "bits": a.get("bits"), "lac": a["lac"]}
    if is_mp(act):
        p["ilaamp"] = {"bits": q["ilaamp"]["bits"], "avg_bits": a["avg_bits"],
                       "beta": a.get("beta", q["ilaamp"]["beta"])}
    if q["zeroshot"]["enabled"]:
        p["zeroshot"] = {k: v for k, v in q["zeroshot"].items() if k != "enabled"}
    return p


def eval_groups(q: Mapping[str, Any]) -> dict[tuple[str, str], list[str]]:
    """(method, group) -> the activation settings of `runs` evaluated in one job. `eval_jobs: group`
    (the default): group `a` = the settings that need no ILA-AMP sweep, `mp` = those that do (they wait
    for it), so a job never waits for an input one of its settings does not need; `eval_jobs: run`: one
    job per setting (group = the setting)."""
    out: dict[tuple[str, str], list[str]] = {}
    for run in q["runs"]:
        method, act = split_run(run)
        if method not in q["methods"]:
            raise ValueError(f"quantization.runs: {run!r} names unknown method {method!r}")
        group = act if q["eval_jobs"] == "run" else ("mp" if is_mp(act) else "a")
        out.setdefault((method, group), []).append(act)
    return out


def eval_group_params(q: Mapping[str, Any], method: str, group: str, seed: int) -> dict:
    acts = eval_groups(q).get((method, group))
    if acts is None:
        raise ValueError(f"no evaluation group {method}/{group}; groups: {sorted(eval_groups(q))}")
    return {"method": method, "seed": int(seed), "group": group, "runs": [eval_params(q, method, a, seed) for a in acts]}


# Scheduling only (issue 24): Snakemake starts the ready job of highest `priority:` first. The tiny default's
# longest chain is convert -> KOTMS -> ILA-AMP sweep -> mixed-precision evaluation, next to KOTMS -> TWLA
# weights -> LAC -> evaluation; every other job (RTN, rotation-only, FP) only has to fit beside them.
# No parameter or number depends on it.
def job_priority(q: Mapping[str, Any], stage: str, method: str | None = None, group: str | None = None) -> int:
    """Snakemake `priority:` of a quantization job (higher starts first among ready jobs)."""
    if stage in ("kotms", "sens"):
        return 10
    feeds_lac = method is not None and any(ACTS[a]["lac"] for m, a in map(split_run, q["runs"]) if m == method)
    if stage in ("weights", "lac"):
        return 9 if feeds_lac else 0
    if stage == "eval":
        return 8 if group == "mp" else (1 if feeds_lac else 0)
    return 0


def report_params(q: Mapping[str, Any]) -> dict:
    return {"seeds": q["seeds"], "runs": q["runs"], "methods": {k: methods.resolve(v) for k, v in q["methods"].items()},
            "model": q["model"], "corpus": q["corpus"], "data": _windows(q), "kotms": q["kotms"], "e2m": q["e2m"],
            "claims": q["claims"]}


# ------------------------------------------------------------------ rule input helpers
# (kept here, not in rules/quantization.smk, so the rules file stays rules only)
def qdir_inputs(config: Mapping[str, Any], method: str, seed: Any) -> list[str]:
    """The packed-model directory a (method, seed) evaluation needs ([] when the method packs nothing)."""
    if not methods.packs(config["quantization"]["methods"][method]):
        return []
    return [paths(config)["qdir"].format(seed=seed, method=method)]


def weights_inputs(config: Mapping[str, Any], method: str) -> dict[str, str]:
    p = paths(config)
    ins = {"model": model_dir(config), "tokens": p["tokens"]}
    if needs_kotms(config["quantization"], method):
        ins["kotms"] = p["kotms"]
    return ins


def lac_inputs(config: Mapping[str, Any], method: str, seed: Any) -> dict[str, str]:
    ins = {"model": model_dir(config), "tokens": paths(config)["tokens"]}
    q = qdir_inputs(config, method, seed)
    if q:
        ins["qdir"] = q[0]
    return ins


def eval_inputs(config: Mapping[str, Any], method: str, act: str, seed: Any) -> dict[str, str]:
    p = paths(config)
    ins = lac_inputs(config, method, seed)
    if ACTS[act]["lac"]:
        ins["lac"] = p["lac"].format(seed=seed, method=method)
    if is_mp(act):
        ins["sens"] = p["sens"]
    return ins


def eval_group_inputs(config: Mapping[str, Any], method: str, group: str, seed: Any) -> dict[str, str]:
    """Every input any setting of the group needs (model, tokens, packed dir, LAC clips, sweep)."""
    ins: dict[str, str] = {}
    for act in eval_groups(config["quantization"])[(method, group)]:
        ins.update(eval_inputs(config, method, act, seed))
    return ins


def eval_group_outputs(config: Mapping[str, Any], method: str, group: str) -> list[str]:
    """The group's evaluation JSONs (wildcard {seed}), in the order of `eval_group_params`' runs."""
    pat = paths(config)["eval"]
    return [pat.replace("{method}", method).replace("{act}", a) for a in eval_groups(config["quantization"])[(method, group)]]


def report_inputs(config: Mapping[str, Any]) -> dict[str, list[str]]:
    q = config["quantization"]
    p = paths(config)
    return {"evals": eval_targets(config), "sens": [p["sens"]] if any_mp(q) else [],
            "kotms_log": [p["kotms_log"]] if any_needs_kotms(q) else [],
            "cross": [p["ul_json"]] if cross_enabled(config) else []}


def opt_flag(flag: str, key: str):
    """A params function giving `--flag <input[key]>` when that input exists, else ''."""
    return lambda w, input: f"--{flag} {input[key]}" if key in input.keys() and input[key] else ""


# ------------------------------------------------------------------ cross-study: unlearning checkpoints
def cross_enabled(config: Mapping[str, Any]) -> bool:
    u = config.get("unlearning") or {}
    return bool(config["quantization"]["cross_unlearning"]["enabled"] and u.get("enabled"))


def cross_keys(q: Mapping[str, Any]) -> list[tuple[int, str, str]]:
    """(unlearning seed, model, scheme) of every quantized unlearning checkpoint, in report order."""
    x = q["cross_unlearning"]
    return [(int(s), m, sc) for s in x["seeds"] for m in x["models"] for sc in x["schemes"]]


def cross_paths(config: Mapping[str, Any], useed: Any, umodel: str, scheme: str) -> dict[str, str]:
    p = paths(config)
    kw = {"run": ul_paths.run_name(config), "useed": useed, "umodel": umodel, "scheme": scheme}
    return {"qdir": p["ul_qdir"].format(**kw), "eval": p["ul_eval"].format(**kw)}


def ul_quantize_inputs(config: Mapping[str, Any], umodel: str, useed: Any) -> dict[str, str]:
    return {"model": ul_paths.model_dir(config, umodel, int(useed)),
            "original": ul_paths.model_dir(config, "full", int(useed))}


def ul_eval_inputs(config: Mapping[str, Any], umodel: str, useed: Any) -> dict[str, str]:
    """The unlearning checkpoint and the original (bin agreement), the unlearning data, and the unlearning
    pipeline's own samples and judged metrics of the same (model, seed): their manifests give the sampling
    and judging parameters, so each quantized model is evaluated exactly as its FP version was."""
    ins = {**ul_quantize_inputs(config, umodel, useed), "data": ul_paths.data_dir(config),
           "ref_samples": ul_paths.samples_path(config, umodel, int(useed)),
           "ref_metrics": ul_paths.metrics_path(config, umodel, int(useed))}
    tok = ul_paths.tokenizer_dir(config)
    if tok:
        ins["tokenizer"] = tok
    return ins


def ul_report_inputs(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per key of `cross_keys` (same order): FP metrics (unlearning pipeline), quantized metrics, qdir."""
    keys = cross_keys(config["quantization"])
    return {"before": [ul_paths.metrics_path(config, m, s) for s, m, _ in keys],
            "after": [cross_paths(config, s, m, sc)["eval"] for s, m, sc in keys],
            "qdirs": [cross_paths(config, s, m, sc)["qdir"] for s, m, sc in keys]}


def ul_quantize_params(q: Mapping[str, Any], scheme: str) -> dict:
    return {"scheme": scheme}


def ul_eval_params(q: Mapping[str, Any], umodel: str, useed: int) -> dict:
    """One job per (unlearning model, seed): every scheme is quantized and evaluated in it."""
    return {"model": umodel, "schemes": list(q["cross_unlearning"]["schemes"]), "seed": int(useed)}


def ul_eval_outputs(config: Mapping[str, Any], kind: str) -> list[str]:
    """Output patterns (wildcards {useed}, {umodel}) of the ul-eval rule, one per scheme: `qdir` or `eval`."""
    p = paths(config)
    key = "ul_qdir" if kind == "qdir" else "ul_eval"
    return [p[key].replace("{run}", ul_paths.run_name(config)).replace("{scheme}", sc)
            for sc in config["quantization"]["cross_unlearning"]["schemes"]]


def ul_report_params(q: Mapping[str, Any]) -> dict:
    x = q["cross_unlearning"]
    return {"keys": [list(k) for k in cross_keys(q)], "decoder": x["decoder"], "judge": x["judge"],
            "claims": {k: q["claims"][k] for k in ("ul_w8_unchanged", "ul_w4_recovers")}}
