"""LLM unlearning under leak@k, with RULE (TOFU schema).

Every stage is a plain function with explicit paths and a typed parameters object (built by
`paperflow.unlearning.plan`); `paperflow unlearning <stage>` is generated from it. Training stages
(finetune, unlearn, rule) checkpoint with `paperflow.core.checkpoint` into `<out>.ckpt/` and resume
from it when rerun with the same parameters; the directory is removed once the stage has finished.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any, TypedDict

from paperflow.core.cli import stage
from paperflow.unlearning import plan

log = logging.getLogger(__name__)


class DataParams(TypedDict):
    data: dict[str, Any]


class FinetuneParams(TypedDict):
    split: str
    train_split: str
    seed: int
    model: dict[str, Any]
    finetune: dict[str, Any]
    forget_split: str
    retain_split: str
    qa_per_author: int
    greedy: dict[str, Any]


class UnlearnParams(TypedDict):
    method: str
    method_params: dict[str, Any]
    unlearn: dict[str, Any]
    seed: int
    forget_split: str
    retain_split: str
    qa_per_author: int
    greedy: dict[str, Any]


class RuleParams(UnlearnParams):
    kind: str
    base: str
    rule: dict[str, Any]
    sample_seed: int


class TrainGroupParams(TypedDict):
    seed: int
    unlearn: dict[str, UnlearnParams]
    rule: dict[str, RuleParams]


class SampleParams(TypedDict):
    model: str
    seed: int
    eval_seed: int
    forget_split: str
    retain_split: str
    qa_per_author: int
    n_samples: int
    max_new_tokens: int
    prompt_field: str
    decoders: list[dict[str, Any]]
    retain_max: int | None
    forget_max: int | None
    prompts_per_batch: int
    greedy_batch: int


class JudgeParams(TypedDict):
    judges: list[str]
    judge_kw: dict[str, Any]
    n_samples: int
    ks: list[int]
    bootstrap: int
    accuracy_judge: str


class SampleGroupParams(TypedDict):
    seed: int
    models: list[str]
    sample: dict[str, SampleParams]
    judge: JudgeParams


class EvaluateParams(TypedDict):
    sample: SampleParams
    judge: JudgeParams


class ReportParams(TypedDict, total=False):
    run_name: str
    seeds: list[int]
    models: list[str]
    methods: dict[str, Any]
    rule: dict[str, Any]
    claims: dict[str, Any]


def ckpt_dir(out: Path) -> Path:
    """Where a training stage keeps its resumable checkpoint (next to its output, removed on success)."""
    return Path(out).with_name(Path(out).name + ".ckpt")


def job_key(params: Any) -> str:
    from paperflow.core.io import config_hash

    return config_hash(dict(params))


# ---------------------------------------------------------------- data
@stage(plan=plan.data_params)
def data(params: DataParams, *, out: Path) -> dict[str, Any]:
    """Generate synthetic TOFU-schema splits (or copy a local TOFU dir) and validate them."""
    from paperflow.core.io import Stage
    from paperflow.unlearning.data import prepare

    with Stage("unlearning.data", config=params, outputs=[out], seed=params["data"]["seed"]) as st:
        man = prepare(params, out)
        st.metrics["rows"] = {k: v["rows"] for k, v in man["splits"].items()}
        st.metrics["flags"] = man["flags"]
    return man


@stage(plan=plan.tokenizer_params)
def tokenizer(params: DataParams, *, data: Path, out: Path) -> int:
    """Train the tiny tier's word-level tokenizer on the data."""
    from paperflow.core.io import Stage
    from paperflow.unlearning.data import load_tofu, split_path
    from paperflow.unlearning.model import prompt_text, train_tokenizer

    texts = []
    for split in ("full", "holdout10", "real_authors", "world_facts", params["data"]["forget_split"] + "_perturbed"):
        try:
            split_path(data, split)
        except FileNotFoundError:
            continue
        rows, _ = load_tofu(data, split, qa_per_author=params["data"]["qa_per_author"])
        for r in rows:
            texts += [prompt_text(r["question"]), r["answer"], prompt_text(r["paraphrased_question"])]
    with Stage("unlearning.tokenizer", config=params, outputs=[out], inputs=[data]) as st:
        st.metrics["vocab_size"] = train_tokenizer(texts, out)
    return st.metrics["vocab_size"]


# ---------------------------------------------------------------- training
@stage(plan=plan.finetune_params)
def finetune(params: FinetuneParams, *, data: Path, out: Path, tokenizer: Path | None = None) -> dict[str, Any]:
    """Fine-tune the original (full) or retrain (retain) reference model (resumable)."""
    from paperflow.core.io import Stage
    from paperflow.core.seeding import seed_everything, stream
    from paperflow.unlearning.data import load_split_checked
    from paperflow.unlearning.model import build_tiny, default_device, load_model, load_tokenizer, save_model
    from paperflow.unlearning.train import finetune as finetune_loop
    from paperflow.unlearning.train import greedy_metrics, jsonl

    seed_everything(params["seed"])
    m = params["model"]
    if m["kind"] == "tiny":
        if tokenizer is None:
            raise SystemExit("finetune: the tiny tier needs --tokenizer (the tokenizer stage's output)")
        tok = load_tokenizer(tokenizer)
        model = build_tiny(m, tok)
    else:
        tok = load_tokenizer(m["pretrained_path"])
        model = load_model(m["pretrained_path"], default_device())
    qpa = params["qa_per_author"]
    train_rows = load_split_checked(data, params["train_split"], qpa)
    forget = load_split_checked(data, params["forget_split"], qpa)
    retain = load_split_checked(data, params["retain_split"], qpa)
    inputs = [data] + ([tokenizer] if tokenizer else [])
    with Stage("unlearning.finetune", config=params, outputs=[out], inputs=inputs, seed=params["seed"]) as st:
        logs = finetune_loop(model, tok, train_rows, params["finetune"], stream(params["seed"], "finetune", params["split"]),
                             ckpt_dir=ckpt_dir(out), key=job_key(params))
        assert logs is not None
        g = params["greedy"]
        rmax = g["retain_max"]
        retain_eval = retain if rmax is None else retain[:: max(1, len(retain) // rmax)][:rmax]
        fm = greedy_metrics(model, tok, forget, g["max_new_tokens"], g["judge"], g["judge_kw"])
        rm = greedy_metrics(model, tok, retain_eval, g["max_new_tokens"], g["judge"], g["judge_kw"])
        save_model(model, tok, out, {"train_log.jsonl": jsonl(logs)})
        st.metrics.update({"forget_greedy_acc": fm["acc"], "retain_greedy_acc": rm["acc"],
                           "forget_greedy_rougeL": fm["rougeL_recall"], "retain_greedy_rougeL": rm["rougeL_recall"],
                           "final_loss": logs[-1]["loss"], "n_params": sum(q.numel() for q in model.parameters())})
        log.info("finetune %s: %s", params["split"], st.metrics)
    shutil.rmtree(ckpt_dir(out), ignore_errors=True)
    return st.metrics


@stage(plan=plan.unlearn_params)
def unlearn(params: UnlearnParams, *, data: Path, full: Path, retain: Path, out: Path) -> dict[str, Any]:
    """Unlearn the forget split from the original model (greedy-calibrated stopping; resumable)."""
    from paperflow.core.io import Stage, read_manifest
    from paperflow.core.seeding import seed_everything, stream
    from paperflow.unlearning.data import load_split_checked
    from paperflow.unlearning.methods import build_method
    from paperflow.unlearning.model import default_device, load_model, load_tokenizer, save_model
    from paperflow.unlearning.train import encode_rows, frozen_copy, greedy_stop_check, jsonl, unlearn_steps

    seed_everything(params["seed"])
    tok = load_tokenizer(full)
    model = load_model(full, default_device())  # the NPO/RMU reference copy below sits there too
    qpa = params["qa_per_author"]
    forget = load_split_checked(data, params["forget_split"], qpa)
    retain_rows = load_split_checked(data, params["retain_split"], qpa)
    u, g = params["unlearn"], params["greedy"]
    retrain_acc = read_manifest(retain)["metrics"]["forget_greedy_acc"]
    target = retrain_acc + u["greedy_margin"]
    mp = {**params["method_params"], "seed_u": params["seed"]}
    with Stage("unlearning.unlearn", config=params, outputs=[out], inputs=[data, full, retain],
               seed=params["seed"]) as st:
        method = build_method(mp, frozen_copy(model) if _needs_ref(mp) else None)
        check = greedy_stop_check(model, tok, forget, target, g["max_new_tokens"], g["judge"], g["judge_kw"])
        res = unlearn_steps(model, tok, method, encode_rows(tok, forget), encode_rows(tok, retain_rows), u,
                            stream(params["seed"], "unlearn", params["method"]), u["max_steps"], check,
                            ckpt_dir=ckpt_dir(out), key=job_key(params))
        assert res is not None
        logs, steps = res
        checks = [r for r in logs if "forget_greedy_acc" in r]
        save_model(model, tok, out, {"train_log.jsonl": jsonl(logs)})
        st.metrics.update({"steps": steps, "greedy_target": target, "retrain_forget_greedy_acc": retrain_acc,
                           "reached_target": bool(checks and checks[-1]["forget_greedy_acc"] <= target),
                           "final_forget_greedy_acc": checks[-1]["forget_greedy_acc"] if checks else None})
        log.info("unlearn %s: %s", params["method"], st.metrics)
    shutil.rmtree(ckpt_dir(out), ignore_errors=True)
    return st.metrics


def _needs_ref(mp: dict[str, Any]) -> bool:
    from paperflow.unlearning.methods import METHODS, import_all

    import_all()
    return METHODS[mp["loss"]].needs_ref


@stage(plan=plan.rule_params)
def rule(params: RuleParams, *, data: Path, base: Path, out: Path) -> dict[str, Any]:
    """RULE (or its gold-only control) on top of an unlearned checkpoint [reconstruction]; resumable per round."""
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.seeding import seed_everything, stream
    from paperflow.unlearning.data import load_split_checked
    from paperflow.unlearning.methods import build_method
    from paperflow.unlearning.model import default_device, load_model, load_tokenizer, save_model
    from paperflow.unlearning.rule import PROCEDURES
    from paperflow.unlearning.train import encode_rows, frozen_copy, jsonl

    seed_everything(params["seed"])
    tok = load_tokenizer(base)
    model = load_model(base, default_device())  # RULE samples on it before its first training round
    qpa = params["qa_per_author"]
    forget = load_split_checked(data, params["forget_split"], qpa)
    retain = load_split_checked(data, params["retain_split"], qpa)
    rp = params["rule"]
    mp = {**params["method_params"], "seed_u": params["seed"]}
    method = build_method(mp, frozen_copy(model) if _needs_ref(mp) else None)
    ck = ckpt_dir(out)
    rounds_dir = ck / "rounds"

    def save_round(r, m, leaks):
        if r < rp["rounds"] and rp["save_rounds"]:  # the last round is the output dir itself
            save_model(m, tok, rounds_dir / f"round{r}")

    with Stage("unlearning.rule", config=params, outputs=[out], inputs=[data, base], seed=params["seed"]) as st:
        res = PROCEDURES["rule"](model, tok, method, forget, encode_rows(tok, forget), encode_rows(tok, retain), rp,
                                 stream(params["seed"], params["kind"], params["base"]), params["sample_seed"],
                                 save_round, ckpt_dir=ck / "state", key=job_key(params))
        assert res is not None
        extra = {"train_log.jsonl": jsonl(res["log"]), "leaks.jsonl": jsonl(res["leaks"]),
                 "rounds.json": json.dumps(res["rounds"], indent=1)}
        with atomic_path(out) as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            tok.save_pretrained(tmp)
            for name, text in extra.items():
                (tmp / name).write_text(text)
            if rounds_dir.exists():
                for d in sorted(rounds_dir.iterdir()):
                    if d.is_dir() and not d.name.startswith("."):
                        shutil.copytree(d, tmp / "rounds" / d.name)
        st.metrics.update({"rounds": res["rounds"], "n_leaks": len(res["leaks"])})
        log.info("%s %s: %s", params["kind"], params["base"], st.metrics)
    shutil.rmtree(ck, ignore_errors=True)
    return st.metrics


@stage(plan=plan.train_group)
def train(params: TrainGroupParams, *, data: Path, full: Path, retain: Path, out: list[Path]) -> dict[str, Any]:
    """Every unlearned model of a seed, then every RULE / control model on top of them, in one process
    (`unlearn.jobs: seed`, the tiny default: each model takes seconds, so separate jobs mostly paid the
    interpreter and torch start-up). Each model is exactly what the `unlearn` / `rule` stage writes for
    it (same function, same parameters, same manifest; each reseeds from its own parameters). --out lists
    one directory per model, named after the model (`<models>/seed<s>/<name>`), in any order: each is
    matched by its name, never by position (Snakemake does not keep the declared order of an unnamed
    list of outputs).

    Interrupted, the model in progress resumes from its `<out>.ckpt/`; models this job had already
    finished are trained again (Snakemake removes all outputs of an incomplete job)."""
    names = list(params["unlearn"]) + list(params["rule"])
    dirs = {Path(o).name: Path(o) for o in out}
    if len(dirs) != len(list(out)) or set(dirs) != set(names):
        raise SystemExit(f"train: --out must be one directory per model, named after it: expected "
                         f"{sorted(names)}, got {sorted(Path(o).name for o in out)}")
    res: dict[str, Any] = {}
    for m, p in params["unlearn"].items():
        res[m] = unlearn(p, data=data, full=full, retain=retain, out=dirs[m])
    for name, p in params["rule"].items():
        if p["base"] not in dirs or p["base"] not in params["unlearn"]:
            raise SystemExit(f"train: {name} needs base model {p['base']!r}, which this job does not train")
        res[name] = rule(p, data=data, base=dirs[p["base"]], out=dirs[name])
    return res


# ---------------------------------------------------------------- evaluation
def _sample(params: SampleParams, data: Path, model_dir: Path, out: Path, tokenizer: Path | None) -> dict[str, Any]:
    import time

    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.seeding import seed_everything
    from paperflow.unlearning.evaluate import sample_model
    from paperflow.unlearning.model import default_device, load_model, load_tokenizer

    seed_everything(params["eval_seed"])
    tok = load_tokenizer(tokenizer or model_dir)
    model = load_model(model_dir, default_device())  # a granted GPU is used; sampling follows the model
    with Stage("unlearning.sample", config=params, outputs=[out], inputs=[data, model_dir], seed=params["eval_seed"]) as st:
        t0 = time.perf_counter()
        recs = sample_model(model, tok, data, params)
        st.metrics["sampling_s"] = round(time.perf_counter() - t0, 3)
        st.metrics["records"] = len(recs)
        with atomic_path(out) as tmp:
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))
    return st.metrics


def _judge(params: JudgeParams, samples: Path, out: Path, seed: int) -> dict[str, Any]:
    from paperflow.core.io import Stage, write_json
    from paperflow.unlearning.evaluate import judge_samples, read_jsonl

    with Stage("unlearning.judge", config=params, outputs=[out], inputs=[samples], seed=seed) as st:
        metrics, _ = judge_samples(read_jsonl(samples), params, seed)
        write_json(out, metrics)
        st.metrics.update(metrics["summary"])
    return metrics


@stage(plan=plan.sample_group)
def sample(params: SampleGroupParams, *, data: Path, models: list[Path], samples: list[Path],
           metrics: list[Path] | None = None, tokenizer: Path | None = None) -> dict[str, Any]:
    """Sample a group of models (params.models, in the order of --models/--samples[/--metrics]): greedy +
    n samples per forget prompt for every decoder; with --metrics, also judge them (labels, leak@k, greedy
    metrics), as the judge stage would.

    One process for the group (tiny scale, `eval.jobs: seed`: every model of a seed, sampled and judged
    in one job, so interpreter, torch and judges start once; paper scale, `eval.jobs: model`: one model,
    judged by a separate CPU job). Each model's samples and metrics get their own manifest, exactly as
    separate sample and judge jobs write them."""
    names = list(params["models"])
    metrics = list(metrics) if metrics else None
    if not (len(names) == len(models) == len(samples)) or (metrics is not None and len(metrics) != len(names)):
        raise SystemExit(f"sample: {len(names)} models in --params but {len(models)} --models, "
                         f"{len(samples)} --samples, {len(metrics or [])} --metrics")
    out: dict[str, Any] = {}
    for i, (name, model, spath) in enumerate(zip(names, models, samples)):
        out[name] = _sample(params["sample"][name], data, model, spath, tokenizer)
        if metrics is not None:
            out[name].update(_judge(params["judge"], spath, metrics[i], int(params["seed"]))["summary"])
        log.info("sample %s seed %s: %s", name, params["seed"], out[name])
    return out


@stage(plan=plan.judge_params)
def judge(params: JudgeParams, *, samples: Path, out: Path, seed: int = 0) -> dict[str, Any]:
    """Judge stored samples: labels per response, leak@k (unbiased estimator) and greedy metrics."""
    return _judge(params, samples, out, seed)


@stage(plan=plan.evaluate_job)
def evaluate(params: EvaluateParams, *, data: Path, model: Path, out_dir: Path,
             tokenizer: Path | None = None) -> dict[str, Any]:
    """Sample + judge any checkpoint dir (e.g. a quantized model): writes samples.jsonl and metrics.json.

    The evaluation seed is params.sample.seed (`--seed` with --config; rules pass it in --params)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _sample(params["sample"], data, model, out_dir / "samples.jsonl", tokenizer)
    return _judge(params["judge"], out_dir / "samples.jsonl", out_dir / "metrics.json", int(params["sample"]["seed"]))


@stage(plan=plan.report_params)
def report(params: ReportParams, *, metrics_root: Path, models_root: Path, out_dir: Path) -> None:
    """Tables, leak@k curves, verdicts and summary.md from the judged metrics and model manifests."""
    from paperflow.unlearning.report import build_report

    build_report(dict(params), metrics_root, models_root, out_dir)
