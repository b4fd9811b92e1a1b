# Unlearning under leak@k, with RULE (src/paperflow/unlearning; spec ../shared/specs/unlearning.md).
from paperflow.unlearning import plan as ul_plan

if "unlearning" in ENABLED:
    _UL = config["unlearning"]
    _UL_RUN = _UL["run_name"]
    UL_DATA = f"{config['data_dir']}/unlearning/{_UL_RUN}/tofu"
    UL_MODELS = f"{config['models_dir']}/unlearning/{_UL_RUN}"
    UL_RES = f"{RESULTS}/unlearning/{_UL_RUN}"
    _UL_METHODS = "|".join(_UL["methods"])
    _UL_BASES = "|".join(_UL["rule"]["bases"])
    _UL_OUT = {k: f"{UL_RES}/{f}" for k, f in (("summary", "summary.md"), ("metrics", "metrics.json"),
                                               ("leak_curves", "leak_curves.png"), ("table", "table.md"))}
    STUDY_TARGETS["unlearning"] = list(_UL_OUT.values())
    STUDY_SUMMARIES["unlearning"] = f"{UL_RES}/summary.md"

    rule unlearning_data:
        output:
            directory(UL_DATA),
        params:
            p=lambda w: as_json(ul_plan.data_params(_UL)),
        log:
            f"logs/unlearning/{_UL_RUN}/data.log",
        threads: 1
        resources:
            **stage_resources("unlearning", "data", mem_mb=1000, runtime=10),
        conda:
            "../envs/unlearning.yaml"
        shell:
            "paperflow unlearning data --params {params.p:q} --out {output} > {log} 2>&1"

    rule unlearning_tokenizer:
        input:
            UL_DATA,
        output:
            directory(f"{UL_MODELS}/tokenizer"),
        params:
            p=lambda w: as_json(ul_plan.tokenizer_params(_UL)),
        log:
            f"logs/unlearning/{_UL_RUN}/tokenizer.log",
        threads: 1
        resources:
            **stage_resources("unlearning", "tokenizer", mem_mb=1000, runtime=10),
        conda:
            "../envs/unlearning.yaml"
        shell:
            "paperflow unlearning tokenizer --params {params.p:q} --data {input} --out {output} > {log} 2>&1"

    rule unlearning_finetune:
        input:
            data=UL_DATA,
            tok=lambda w: f"{UL_MODELS}/tokenizer" if _UL["model"]["kind"] == "tiny" else _UL["model"]["pretrained_path"],
        output:
            directory(f"{UL_MODELS}/seed{{seed}}/{{ul_split}}"),
        wildcard_constraints:
            ul_split="full|retain",
        params:
            p=lambda w: as_json(ul_plan.finetune_params(_UL, w.ul_split, int(w.seed))),
            tok=lambda w, input: f"--tokenizer {input.tok}" if _UL["model"]["kind"] == "tiny" else "",
        log:
            f"logs/unlearning/{_UL_RUN}/finetune/{{ul_split}}_seed{{seed}}.log",
        benchmark:
            f"benchmarks/unlearning/{_UL_RUN}/finetune/{{ul_split}}_seed{{seed}}.tsv"
        threads: 1
        resources:
            **stage_resources("unlearning", "finetune", mem_mb=4000, runtime=60),
        conda:
            "../envs/unlearning.yaml"
        shell:
            "paperflow unlearning finetune --params {params.p:q} --data {input.data} {params.tok} --out {output} > {log} 2>&1"

    # unlearn.jobs: seed (tiny default) = every unlearned, RULE and control model of a seed in one job
    # (stage `train`); unlearn.jobs: model (paper scale) = one GPU job per (model, seed). The same model
    # directories and manifests either way.
    if _UL["unlearn"]["jobs"] == "seed":

        rule unlearning_train:
            input:
                data=UL_DATA,
                full=lambda w: f"{UL_MODELS}/seed{ul_plan.ref_seed(_UL, w.seed)}/full",
                retain=lambda w: f"{UL_MODELS}/seed{ul_plan.ref_seed(_UL, w.seed)}/retain",
            output:
                [directory(f"{UL_MODELS}/seed{{seed}}/{m}") for m in ul_plan.train_models(_UL)],
            wildcard_constraints:
                seed=r"\d+",
            params:
                p=lambda w: as_json(ul_plan.train_group(_UL, int(w.seed))),
            log:
                f"logs/unlearning/{_UL_RUN}/train/seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/train/seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "train", mem_mb=4000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning train --params {params.p:q} --data {input.data} --full {input.full} "
                "--retain {input.retain} --out {output} > {log} 2>&1"

    else:

        rule unlearning_unlearn:
            input:
                data=UL_DATA,
                full=lambda w: f"{UL_MODELS}/seed{ul_plan.ref_seed(_UL, w.seed)}/full",
                retain=lambda w: f"{UL_MODELS}/seed{ul_plan.ref_seed(_UL, w.seed)}/retain",
            output:
                directory(f"{UL_MODELS}/seed{{seed}}/{{ul_method}}"),
            wildcard_constraints:
                ul_method=_UL_METHODS,
            params:
                p=lambda w: as_json(ul_plan.unlearn_params(_UL, w.ul_method, int(w.seed))),
            log:
                f"logs/unlearning/{_UL_RUN}/unlearn/{{ul_method}}_seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/unlearn/{{ul_method}}_seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "unlearn", mem_mb=4000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning unlearn --params {params.p:q} --data {input.data} --full {input.full} "
                "--retain {input.retain} --out {output} > {log} 2>&1"

        rule unlearning_rule:
            input:
                data=UL_DATA,
                base=f"{UL_MODELS}/seed{{seed}}/{{ul_base}}",
            output:
                directory(f"{UL_MODELS}/seed{{seed}}/{{ul_kind}}_{{ul_base}}"),
            wildcard_constraints:
                ul_kind="rule|control",
                ul_base=_UL_BASES,
            params:
                p=lambda w: as_json(ul_plan.rule_params(_UL, w.ul_kind, w.ul_base, int(w.seed))),
            log:
                f"logs/unlearning/{_UL_RUN}/rule/{{ul_kind}}_{{ul_base}}_seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/rule/{{ul_kind}}_{{ul_base}}_seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "rule", mem_mb=4000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning rule --params {params.p:q} --data {input.data} --base {input.base} "
                "--out {output} > {log} 2>&1"

    # eval.jobs: seed (tiny default) = sample + judge of every model of a seed in one job (stage `sample`
    # with --metrics); eval.jobs: model (paper scale) = a sampling job (GPU) and a judging job (CPU) per
    # (model, seed). The same output files and manifests either way.
    _UL_EVAL_MODELS = ul_plan.model_names(_UL)
    if _UL["eval"]["jobs"] == "seed":

        rule unlearning_sample:
            input:
                data=UL_DATA,
                models=lambda w: [f"{UL_MODELS}/seed{ul_plan.model_seed(_UL, m, w.seed)}/{m}" for m in _UL_EVAL_MODELS],
            output:
                samples=[f"{UL_RES}/samples/seed{{seed}}/{m}.jsonl" for m in _UL_EVAL_MODELS],
                metrics=[f"{UL_RES}/metrics/seed{{seed}}/{m}.json" for m in _UL_EVAL_MODELS],
            wildcard_constraints:
                seed=r"\d+",
            params:
                p=lambda w: as_json(ul_plan.sample_group(_UL, int(w.seed))),
            log:
                f"logs/unlearning/{_UL_RUN}/sample/seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/sample/seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "sample", mem_mb=4000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning sample --params {params.p:q} --data {input.data} --models {input.models} "
                "--samples {output.samples} --metrics {output.metrics} > {log} 2>&1"

    else:

        rule unlearning_sample:
            input:
                data=UL_DATA,
                model=lambda w: f"{UL_MODELS}/seed{ul_plan.model_seed(_UL, w.ul_model, w.seed)}/{w.ul_model}",
            output:
                f"{UL_RES}/samples/seed{{seed}}/{{ul_model}}.jsonl",
            wildcard_constraints:
                seed=r"\d+",
                ul_model="|".join(_UL_EVAL_MODELS),
            params:
                p=lambda w: as_json(ul_plan.sample_group(_UL, int(w.seed), w.ul_model)),
            log:
                f"logs/unlearning/{_UL_RUN}/sample/{{ul_model}}_seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/sample/{{ul_model}}_seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "sample", mem_mb=4000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning sample --params {params.p:q} --data {input.data} --models {input.model} "
                "--samples {output} > {log} 2>&1"

        rule unlearning_judge:
            input:
                f"{UL_RES}/samples/seed{{seed}}/{{ul_model}}.jsonl",
            output:
                f"{UL_RES}/metrics/seed{{seed}}/{{ul_model}}.json",
            wildcard_constraints:
                seed=r"\d+",
                ul_model="|".join(_UL_EVAL_MODELS),
            params:
                p=lambda w: as_json(ul_plan.judge_params(_UL)),
            log:
                f"logs/unlearning/{_UL_RUN}/judge/{{ul_model}}_seed{{seed}}.log",
            benchmark:
                f"benchmarks/unlearning/{_UL_RUN}/judge/{{ul_model}}_seed{{seed}}.tsv"
            threads: 1
            resources:
                **stage_resources("unlearning", "judge", mem_mb=1000, runtime=30),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning judge --params {params.p:q} --samples {input} --seed {wildcards.seed} "
                "--out {output} > {log} 2>&1"

    rule unlearning_report:
        input:
            metrics=expand(f"{UL_RES}/metrics/seed{{seed}}/{{ul_model}}.json", seed=_UL["seeds"],
                           ul_model=ul_plan.model_names(_UL)),
            models=sorted({f"{UL_MODELS}/seed{ul_plan.model_seed(_UL, m, s)}/{m}" for s in _UL["seeds"]
                           for m in ul_plan.model_names(_UL)}),
        output:
            summary=_UL_OUT["summary"],
            metrics=_UL_OUT["metrics"],
            leak_curves=report(_UL_OUT["leak_curves"], category="unlearning", subcategory=f"run: {_UL_RUN}",
                               caption="../workflow/report/unlearning.rst"),
            table=_UL_OUT["table"],
        params:
            p=lambda w: as_json(ul_plan.report_params(_UL)),
            metrics_root=lambda w, input: str(Path(input.metrics[0]).parents[1]),
            models_root=lambda w, input: str(Path(input.models[0]).parents[1]),
            out_dir=lambda w, output: str(Path(output.summary).parent),
        log:
            f"logs/unlearning/{_UL_RUN}/report.log",
        threads: 1
        resources:
            **stage_resources("unlearning", "report", mem_mb=1000, runtime=10),
        conda:
            "../envs/unlearning.yaml"
        shell:
            "paperflow unlearning report --params {params.p:q} --metrics-root {params.metrics_root} "
            "--models-root {params.models_root} --out-dir {params.out_dir} > {log} 2>&1"
