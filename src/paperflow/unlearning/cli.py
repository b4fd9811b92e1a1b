"""`paperflow unlearning <stage>`: data, tokenizer, finetune, unlearn, rule, sample, judge, evaluate, report.

Heavy imports (torch, transformers) happen inside the run functions only.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from paperflow.core.cli import Study, add_config_args, job_params

study = Study("unlearning", "LLM unlearning under leak@k, with RULE (TOFU schema)")
log = logging.getLogger(__name__)
NAME = "unlearning"


def _threads() -> None:
    import os

    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


@study.stage("data", "generate synthetic TOFU-schema splits (or copy a local TOFU dir) and validate them")
def _data(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--out", required=True, type=Path, help="data directory ({split}.json + manifest.json)")

    def run(a):
        from paperflow.core.io import Stage
        from paperflow.unlearning import plan
        from paperflow.unlearning.data import prepare

        params = job_params(a, NAME, plan.data_params)
        with Stage("unlearning.data", config=params, outputs=[a.out], seed=params["data"]["seed"]) as st:
            man = prepare(params, a.out)
            st.metrics["rows"] = {k: v["rows"] for k, v in man["splits"].items()}
            st.metrics["flags"] = man["flags"]

    return run


@study.stage("tokenizer", "train the tiny tier's word-level tokenizer on the data")
def _tokenizer(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)

    def run(a):
        from paperflow.core.io import Stage
        from paperflow.unlearning import plan
        from paperflow.unlearning.data import load_tofu
        from paperflow.unlearning.model import prompt_text, train_tokenizer

        params = job_params(a, NAME, plan.tokenizer_params)
        texts = []
        for split in ("full", "holdout10", "real_authors", "world_facts", params["data"]["forget_split"] + "_perturbed"):
            try:
                rows, _ = load_tofu(a.data, split, qa_per_author=params["data"]["qa_per_author"])
            except FileNotFoundError:
                continue
            for r in rows:
                texts += [prompt_text(r["question"]), r["answer"], prompt_text(r["paraphrased_question"])]
        with Stage("unlearning.tokenizer", config=params, outputs=[a.out], inputs=[a.data]) as st:
            st.metrics["vocab_size"] = train_tokenizer(texts, a.out)

    return run


def _ref_setup(params):
    from paperflow.core.seeding import seed_everything

    _threads()
    seed_everything(params["seed"])


@study.stage("finetune", "fine-tune the original (full) or retrain (retain) reference model")
def _finetune(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--split", choices=["full", "retain"], help="by hand only (rules pass --params)")
    p.add_argument("--seed", type=int, default=0, help="by hand only")
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--tokenizer", type=Path, default=None, help="tiny tier: the trained tokenizer dir")
    p.add_argument("--out", required=True, type=Path)

    def run(a):
        from paperflow.core.io import Stage
        from paperflow.core.seeding import stream
        from paperflow.unlearning import plan
        from paperflow.unlearning.data import load_split_checked
        from paperflow.unlearning.model import build_tiny, default_device, load_model, load_tokenizer, save_model
        from paperflow.unlearning.train import finetune, greedy_metrics, jsonl

        params = job_params(a, NAME, lambda c: plan.finetune_params(c, a.split or "full", a.seed))
        _ref_setup(params)
        m = params["model"]
        if m["kind"] == "tiny":
            tok = load_tokenizer(a.tokenizer)
            model = build_tiny(m, tok)
        else:
            tok = load_tokenizer(m["pretrained_path"])
            model = load_model(m["pretrained_path"], default_device())
        qpa = params["qa_per_author"]
        train_rows = load_split_checked(a.data, params["train_split"], qpa)
        forget = load_split_checked(a.data, params["forget_split"], qpa)
        retain = load_split_checked(a.data, params["retain_split"], qpa)
        inputs = [a.data] + ([a.tokenizer] if a.tokenizer else [])
        with Stage("unlearning.finetune", config=params, outputs=[a.out], inputs=inputs, seed=params["seed"]) as st:
            logs = finetune(model, tok, train_rows, params["finetune"], stream(params["seed"], "finetune", params["split"]))
            g = params["greedy"]
            rmax = g["retain_max"]
            retain_eval = retain if rmax is None else retain[:: max(1, len(retain) // rmax)][:rmax]
            fm = greedy_metrics(model, tok, forget, g["max_new_tokens"], g["judge"], g["judge_kw"])
            rm = greedy_metrics(model, tok, retain_eval, g["max_new_tokens"], g["judge"], g["judge_kw"])
            save_model(model, tok, a.out, {"train_log.jsonl": jsonl(logs)})
            st.metrics.update({"forget_greedy_acc": fm["acc"], "retain_greedy_acc": rm["acc"],
                               "forget_greedy_rougeL": fm["rougeL_recall"], "retain_greedy_rougeL": rm["rougeL_recall"],
                               "final_loss": logs[-1]["loss"], "n_params": sum(q.numel() for q in model.parameters())})
            log.info("finetune %s: %s", params["split"], st.metrics)

    return run


@study.stage("unlearn", "unlearn the forget split from the original model (greedy-calibrated stopping)")
def _unlearn(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--method", help="by hand only: a key of unlearning.methods")
    p.add_argument("--seed", type=int, default=0, help="by hand only")
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--full", required=True, type=Path, help="original model dir")
    p.add_argument("--retain", required=True, type=Path, help="retrain model dir (its manifest gives the greedy target)")
    p.add_argument("--out", required=True, type=Path)

    def run(a):
        from paperflow.core.io import Stage, read_manifest
        from paperflow.core.seeding import stream
        from paperflow.unlearning import plan
        from paperflow.unlearning.data import load_split_checked
        from paperflow.unlearning.methods import build_method
        from paperflow.unlearning.model import default_device, load_model, load_tokenizer, save_model
        from paperflow.unlearning.train import encode_rows, frozen_copy, greedy_stop_check, jsonl, unlearn_steps

        params = job_params(a, NAME, lambda c: plan.unlearn_params(c, a.method, a.seed))
        _ref_setup(params)
        tok = load_tokenizer(a.full)
        model = load_model(a.full, default_device())  # the NPO/RMU reference copy below sits there too
        qpa = params["qa_per_author"]
        forget = load_split_checked(a.data, params["forget_split"], qpa)
        retain = load_split_checked(a.data, params["retain_split"], qpa)
        u, g = params["unlearn"], params["greedy"]
        retrain_acc = read_manifest(a.retain)["metrics"]["forget_greedy_acc"]
        target = retrain_acc + u["greedy_margin"]
        mp = {**params["method_params"], "seed_u": params["seed"]}
        with Stage("unlearning.unlearn", config=params, outputs=[a.out], inputs=[a.data, a.full, a.retain],
                   seed=params["seed"]) as st:
            method = build_method(mp, frozen_copy(model))
            if not method.needs_ref:
                method.ref = None
            check = greedy_stop_check(model, tok, forget, target, g["max_new_tokens"], g["judge"], g["judge_kw"])
            logs, steps = unlearn_steps(model, tok, method, encode_rows(tok, forget), encode_rows(tok, retain), u,
                                        stream(params["seed"], "unlearn", params["method"]), u["max_steps"], check)
            checks = [r for r in logs if "forget_greedy_acc" in r]
            save_model(model, tok, a.out, {"train_log.jsonl": jsonl(logs)})
            st.metrics.update({"steps": steps, "greedy_target": target, "retrain_forget_greedy_acc": retrain_acc,
                               "reached_target": bool(checks and checks[-1]["forget_greedy_acc"] <= target),
                               "final_forget_greedy_acc": checks[-1]["forget_greedy_acc"] if checks else None})
            log.info("unlearn %s: %s", params["method"], st.metrics)

    return run


@study.stage("rule", "RULE (or its gold-only control) on top of an unlearned checkpoint [reconstruction]")
def _rule(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--kind", choices=["rule", "control"], default="rule", help="by hand only")
    p.add_argument("--base-method", help="by hand only: a key of unlearning.methods")
    p.add_argument("--seed", type=int, default=0, help="by hand only")
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--base", required=True, type=Path, help="the base method's unlearned model dir")
    p.add_argument("--out", required=True, type=Path)

    def run(a):
        from paperflow.core.io import Stage
        from paperflow.core.seeding import stream
        from paperflow.unlearning import plan
        from paperflow.unlearning.data import load_split_checked
        from paperflow.unlearning.methods import build_method
        from paperflow.unlearning.methods.rule import PROCEDURES
        from paperflow.unlearning.model import save_model
        from paperflow.unlearning.model import default_device, load_model, load_tokenizer
        from paperflow.unlearning.train import encode_rows, frozen_copy, jsonl

        params = job_params(a, NAME, lambda c: plan.rule_params(c, a.kind, a.base_method, a.seed))
        _ref_setup(params)
        tok = load_tokenizer(a.base)
        model = load_model(a.base, default_device())  # RULE samples on it before its first training round
        qpa = params["qa_per_author"]
        forget = load_split_checked(a.data, params["forget_split"], qpa)
        retain = load_split_checked(a.data, params["retain_split"], qpa)
        rp = params["rule"]
        method = build_method({**params["method_params"], "seed_u": params["seed"]}, frozen_copy(model))
        if not method.needs_ref:
            method.ref = None
        rounds: dict[int, tuple] = {}

        def save_round(r, m, leaks):
            if rp["save_rounds"] or r == rp["rounds"]:
                rounds[r] = ({k: v.detach().clone() for k, v in m.state_dict().items()}, leaks)

        with Stage("unlearning.rule", config=params, outputs=[a.out], inputs=[a.data, a.base], seed=params["seed"]) as st:
            res = PROCEDURES["rule"](model, tok, method, forget, encode_rows(tok, forget), encode_rows(tok, retain), rp,
                                     stream(params["seed"], params["kind"], params["base"]), params["sample_seed"],
                                     save_round)
            extra = {"train_log.jsonl": jsonl(res["log"]), "leaks.jsonl": jsonl(res["leaks"]),
                     "rounds.json": json.dumps(res["rounds"], indent=1)}
            # intermediate rounds as save_pretrained dirs under rounds/round{r}/ (final = the dir itself)
            final_state = {k: v.clone() for k, v in model.state_dict().items()}
            import tempfile

            with tempfile.TemporaryDirectory() as td:
                round_dirs = {}
                for r, (state, _) in rounds.items():
                    if r == rp["rounds"]:
                        continue
                    model.load_state_dict(state)
                    save_model(model, tok, Path(td) / f"round{r}")
                    round_dirs[r] = Path(td) / f"round{r}"
                model.load_state_dict(final_state)
                from paperflow.core.io import atomic_path

                with atomic_path(a.out) as tmp:
                    model.save_pretrained(tmp, safe_serialization=True)
                    tok.save_pretrained(tmp)
                    for name, text in extra.items():
                        (tmp / name).write_text(text)
                    for r, d in round_dirs.items():
                        import shutil

                        shutil.copytree(d, tmp / "rounds" / f"round{r}")
            st.metrics.update({"rounds": res["rounds"], "n_leaks": len(res["leaks"])})
            log.info("%s %s: %s", params["kind"], params["base"], st.metrics)

    return run


def _sample_run(a, params, model_dir, out):
    from paperflow.core.io import Stage, atomic_path
    from paperflow.core.seeding import seed_everything
    from paperflow.unlearning.evaluate import sample_model
    from paperflow.unlearning.model import default_device, load_model, load_tokenizer

    _threads()
    seed_everything(params["eval_seed"])
    tok = load_tokenizer(a.tokenizer or model_dir)
    model = load_model(model_dir, default_device())  # a granted GPU is used; sampling follows the model
    with Stage("unlearning.sample", config=params, outputs=[out], inputs=[a.data, model_dir], seed=params["eval_seed"]) as st:
        import time

        t0 = time.perf_counter()
        recs = sample_model(model, tok, a.data, params)
        st.metrics["sampling_s"] = round(time.perf_counter() - t0, 3)
        st.metrics["records"] = len(recs)
        with atomic_path(out) as tmp:
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))


def _judge_run(params, samples, out, seed):
    from paperflow.core.io import Stage, write_json
    from paperflow.unlearning.evaluate import judge_samples, read_jsonl

    with Stage("unlearning.judge", config=params, outputs=[out], inputs=[samples], seed=seed) as st:
        metrics, _ = judge_samples(read_jsonl(samples), params, seed)
        write_json(out, metrics)
        st.metrics.update(metrics["summary"])


@study.stage("sample", "greedy + n samples per forget prompt for every decoder (shared-prefix batched)")
def _sample(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--model", required=True, type=Path, help="save_pretrained dir")
    p.add_argument("--tokenizer", type=Path, default=None, help="default: the model dir")
    p.add_argument("--seed", type=int, default=0, help="by hand only")
    p.add_argument("--out", required=True, type=Path, help="samples .jsonl")

    def run(a):
        from paperflow.unlearning import plan

        params = job_params(a, NAME, lambda c: plan.sample_params(c, a.model.name, a.seed))
        _sample_run(a, params, a.model, a.out)

    return run


@study.stage("judge", "judge stored samples; leak@k (unbiased estimator) + greedy metrics")
def _judge(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--samples", required=True, type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, type=Path)

    def run(a):
        from paperflow.unlearning import plan

        _judge_run(job_params(a, NAME, plan.judge_params), a.samples, a.out, a.seed)

    return run


@study.stage("evaluate", "sample + judge any checkpoint dir (e.g. a quantized model): leak@k and utility")
def _evaluate(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--data", required=True, type=Path, help="TOFU-format dir (the data stage's output)")
    p.add_argument("--model", required=True, type=Path, help="save_pretrained dir")
    p.add_argument("--tokenizer", type=Path, default=None, help="default: the model dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", required=True, type=Path, help="writes samples.jsonl and metrics.json")

    def run(a):
        from paperflow.core.cli import study_config
        from paperflow.unlearning import plan

        if a.params:
            both = json.loads(a.params)
            sp, jp = both["sample"], both["judge"]
        else:
            cfg = study_config(a, NAME)
            sp, jp = plan.sample_params(cfg, a.model.name, a.seed), plan.judge_params(cfg)
        a.out_dir.mkdir(parents=True, exist_ok=True)
        _sample_run(a, sp, a.model, a.out_dir / "samples.jsonl")
        _judge_run(jp, a.out_dir / "samples.jsonl", a.out_dir / "metrics.json", a.seed)

    return run


@study.stage("report", "tables, leak@k curves and summary.md from the judged metrics and model manifests")
def _report(p: argparse.ArgumentParser):
    add_config_args(p)
    p.add_argument("--metrics-root", required=True, type=Path, help="dir with seed{s}/{model}.json")
    p.add_argument("--models-root", required=True, type=Path, help="dir with seed{s}/{model}/ (manifests read)")
    p.add_argument("--out-dir", required=True, type=Path)

    def run(a):
        from paperflow.unlearning import plan
        from paperflow.unlearning.report import build_report

        build_report(job_params(a, NAME, plan.report_params), a.metrics_root, a.models_root, a.out_dir)

    return run


STUDIES = [study]
