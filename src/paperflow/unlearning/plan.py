"""Planning: the exact parameters each job depends on, derived from the validated config section.

Rules pass these as `--params JSON` (Snakemake reruns a job when they change); the CLI derives the
same from `--config` by hand. Model names: `full` (original), `retain` (retrain), each key of
`methods`, and `rule_<base>` / `control_<base>` for each RULE base.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paperflow.unlearning.leak import default_ks

REFERENCE_MODELS = ("full", "retain")


def rule_models(cfg: Mapping[str, Any]) -> list[str]:
    r = cfg["rule"]
    out = [f"rule_{b}" for b in r["bases"]]
    if r["control"]:
        out += [f"control_{b}" for b in r["bases"]]
    return out


def model_names(cfg: Mapping[str, Any]) -> list[str]:
    return list(REFERENCE_MODELS) + list(cfg["methods"]) + rule_models(cfg)


def ref_seed(cfg: Mapping[str, Any], seed: int) -> int:
    """Seed whose full/retain models serve `seed` (shared unless finetune.per_seed)."""
    return int(seed) if cfg["finetune"]["per_seed"] else int(cfg["seeds"][0])


def model_seed(cfg: Mapping[str, Any], model: str, seed: int) -> int:
    return ref_seed(cfg, seed) if model in REFERENCE_MODELS else int(seed)


def judge_kw(cfg: Mapping[str, Any]) -> dict[str, Any]:
    e = cfg["eval"]
    return {"gate": e["rouge_gate"], "threshold": e["rouge_threshold"], "nli_model": e["nli_model"]}


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"data": dict(cfg["data"])}


def tokenizer_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"data": dict(cfg["data"])}


def _greedy_eval(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {"max_new_tokens": cfg["eval"]["max_new_tokens"], "judge": cfg["eval"]["headline_judge"],
            "judge_kw": judge_kw(cfg), "retain_max": cfg["eval"]["retain_max"]}


def finetune_params(cfg: Mapping[str, Any], split: str, seed: int) -> dict[str, Any]:
    d = cfg["data"]
    return {"split": split, "train_split": "full" if split == "full" else d["retain_split"], "seed": int(seed), "model": dict(cfg["model"]), "finetune": dict(cfg["finetune"]),
            "forget_split": d["forget_split"], "retain_split": d["retain_split"],
            "qa_per_author": d["qa_per_author"], "greedy": _greedy_eval(cfg)}


def check_method(name: str, entry: Mapping[str, Any]) -> None:
    """Fail at planning time (e.g. `snakemake -n`) on a hyperparameter the method does not take or an
    invalid value, naming the config entry (the method class owns its hyperparameters)."""
    from paperflow.unlearning.methods import build_method

    try:
        build_method(dict(entry))
    except ValueError as e:
        raise ValueError(f"config error in unlearning.methods.{name}: {e}") from None


def unlearn_params(cfg: Mapping[str, Any], method: str, seed: int) -> dict[str, Any]:
    d = cfg["data"]
    u = {k: v for k, v in cfg["unlearn"].items() if k != "jobs"}  # job granularity changes no model
    m = dict(cfg["methods"][method])
    check_method(method, m)
    u["lr"] = m["lr"] if m["lr"] is not None else u["lr"]
    u["max_steps"] = m["max_steps"] if m["max_steps"] is not None else u["max_steps"]
    return {"method": method, "method_params": m, "unlearn": u, "seed": int(seed),
            "forget_split": d["forget_split"], "retain_split": d["retain_split"],
            "qa_per_author": d["qa_per_author"], "greedy": _greedy_eval(cfg)}


def rule_params(cfg: Mapping[str, Any], kind: str, base_method: str, seed: int) -> dict[str, Any]:
    """RULE (kind "rule") or its gold-only control ("control") on top of `base_method`'s checkpoint."""
    base = base_method
    base_p = unlearn_params(cfg, base, seed)
    r = dict(cfg["rule"])
    proc = {**base_p["unlearn"], **{k: r[k] for k in ("rounds", "samples_per_prompt", "steps_per_round",
                                                       "weighting", "weight_k", "judge", "attack_decoder",
                                                       "save_rounds")},
            "sample": kind == "rule", "judge_kw": judge_kw(cfg), "max_new_tokens": cfg["eval"]["max_new_tokens"],
            "prompts_per_batch": cfg["eval"]["prompts_per_batch"]}
    return {**base_p, "kind": kind, "base": base, "rule": proc,
            "sample_seed": int(seed) + r["seed_offset"]}


def train_models(cfg: Mapping[str, Any]) -> list[str]:
    """The models a seed's training job writes (`unlearn.jobs: seed`): every method, then RULE/controls."""
    return list(cfg["methods"]) + rule_models(cfg)


def train_group(cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The train stage's plan: every unlearned model of run seed `seed` (each with exactly its
    `unlearn_params`), then every RULE / control model on top of them (each with its `rule_params`)."""
    rules = {}
    for name in rule_models(cfg):
        kind, base = name.split("_", 1)
        rules[name] = rule_params(cfg, kind, base, seed)
    return {"seed": int(seed), "unlearn": {m: unlearn_params(cfg, m, seed) for m in cfg["methods"]},
            "rule": rules}


def sample_params(cfg: Mapping[str, Any], model: str, seed: int) -> dict[str, Any]:
    e, d = cfg["eval"], cfg["data"]
    return {"model": model, "seed": int(seed), "eval_seed": int(seed) + e["seed_offset"],
            "forget_split": d["forget_split"], "retain_split": d["retain_split"], "qa_per_author": d["qa_per_author"],
            **{k: e[k] for k in ("n_samples", "max_new_tokens", "prompt_field", "decoders", "retain_max",
                                 "forget_max", "prompts_per_batch", "greedy_batch")}}


def sample_group(cfg: Mapping[str, Any], seed: int, model_name: str | None = None) -> dict[str, Any]:
    """The sample stage's plan: sample + judge every model of run seed `seed` (`eval.jobs: seed`, one job
    per seed) or only `model_name` (`eval.jobs: model`, one job per model and seed). Each model keeps its
    own `sample_params` (its samples' manifest) and the shared `judge_params` (its metrics' manifest)."""
    names = [model_name] if model_name else model_names(cfg)
    return {"seed": int(seed), "models": names, "sample": {m: sample_params(cfg, m, seed) for m in names},
            "judge": judge_params(cfg)}




def evaluate_job(cfg: Mapping[str, Any], model_name: str = "checkpoint", seed: int = 0) -> dict[str, Any]:
    """The evaluate stage's parameters: what the sample and judge stages of the pipeline would use."""
    return {"sample": sample_params(cfg, model_name, seed), "judge": judge_params(cfg)}


def judge_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    e = cfg["eval"]
    return {"judges": list(e["judges"]), "judge_kw": judge_kw(cfg), "n_samples": e["n_samples"],
            "ks": e["ks"] or default_ks(e["n_samples"]), "bootstrap": e["bootstrap"],
            "accuracy_judge": e["headline_judge"]}


def report_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    e = cfg["eval"]
    return {"run_name": cfg["run_name"], "seeds": list(cfg["seeds"]), "models": model_names(cfg),
            "methods": {k: dict(v) for k, v in cfg["methods"].items()}, "rule": dict(cfg["rule"]),
            "headline_decoder": e["headline_decoder"], "headline_judge": e["headline_judge"],
            "decoders": [dd["name"] for dd in e["decoders"]], "judges": list(e["judges"]),
            "ks": e["ks"] or default_ks(e["n_samples"]), "n_samples": e["n_samples"],
            "greedy_margin": cfg["unlearn"]["greedy_margin"],
            "model_kind": cfg["model"]["kind"], "data_source": cfg["data"]["source"],
            "prompt_field": e["prompt_field"], "claims": {k: dict(v) for k, v in cfg["claims"].items()},
            "model_seeds": {m: {str(s): model_seed(cfg, m, s) for s in cfg["seeds"]} for m in model_names(cfg)}}
