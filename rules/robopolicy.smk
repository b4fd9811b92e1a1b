# robopolicy: LARA (data -> lam_pretrain (S1) -> train (S2+S3) per variant x seed -> evaluate -> lara_report;
# with lara.jobs: seed, the tiny default, train + evaluate of all variants of a seed are one lara_seed job)
# and GAM [reconstruction] (gam_run per seed -> gam_report), then one combined summary for the study key.
# Logic: src/paperflow/robopolicy; parameters: config["robopolicy"]; spec: specs/robotics.md d-e.
from paperflow.robopolicy import plan as robopolicy_plan

RP_RES = f"{RESULTS}/robotics"
RP_DATA = f"{config['data_dir']}/robopolicy"
RP_MODELS = f"{config['models_dir']}/robopolicy"

if "robopolicy" in ENABLED:
    STUDY_TARGETS["robopolicy"] = robopolicy_plan.targets(config["robopolicy"], RESULTS)
    STUDY_SUMMARIES["robopolicy"] = f"{RP_RES}/robopolicy_summary.md"


wildcard_constraints:
    rpvariant=r"dit_only|frozen_align|lara|lara_mse",
    rpseed=r"\d+",


rule robopolicy_data:
    output:
        directory(f"{RP_DATA}/mv"),
    params:
        p=lambda w: as_json(robopolicy_plan.data_params(config["robopolicy"])),
    log:
        "logs/robopolicy/data.log",
    benchmark:
        "benchmarks/robopolicy/data.tsv"
    priority: robopolicy_plan.job_priority("data")
    threads: 1
    resources:
        **stage_resources("robopolicy", "data", mem_mb=3000, runtime=30),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy data --params {params.p:q} --out {output} > {log} 2>&1"


rule robopolicy_lam_pretrain:
    input:
        f"{RP_DATA}/mv",
    output:
        directory(f"{RP_MODELS}/lam_s1/seed{{rpseed}}"),
    params:
        p=lambda w: as_json(robopolicy_plan.lam_params(config["robopolicy"])),
    log:
        "logs/robopolicy/lam_pretrain/seed{rpseed}.log",
    benchmark:
        "benchmarks/robopolicy/lam_pretrain/seed{rpseed}.tsv"
    priority: robopolicy_plan.job_priority("lam_pretrain")
    threads: 1
    resources:
        **stage_resources("robopolicy", "lam_pretrain", mem_mb=3000, runtime=30),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy lam-pretrain --params {params.p:q} --data {input} --seed {wildcards.rpseed} "
        "--out {output} > {log} 2>&1"


if robopolicy_plan.jobs_per_seed(config["robopolicy"]):

    rule robopolicy_lara_seed:
        input:
            data=f"{RP_DATA}/mv",
            lam=f"{RP_MODELS}/lam_s1/seed{{rpseed}}",
        output:
            models=[directory(robopolicy_plan.model_dir(RP_MODELS, v, "{rpseed}"))
                    for v in robopolicy_plan.variants(config["robopolicy"])],
            metrics=[f"{robopolicy_plan.lara_eval_dir(RESULTS, v, '{rpseed}')}/metrics.json"
                     for v in robopolicy_plan.variants(config["robopolicy"])],
            frames=[f"{robopolicy_plan.lara_eval_dir(RESULTS, v, '{rpseed}')}/frames.npz"
                    for v in robopolicy_plan.variants(config["robopolicy"])],
        params:
            p=lambda w: as_json(robopolicy_plan.seed_group(config["robopolicy"])),
        log:
            "logs/robopolicy/lara_seed/seed{rpseed}.log",
        benchmark:
            "benchmarks/robopolicy/lara_seed/seed{rpseed}.tsv"
        priority: robopolicy_plan.job_priority("lara_seed")
        threads: 1
        resources:
            **stage_resources("robopolicy", "lara_seed", mem_mb=3000, runtime=120),
        conda:
            "../envs/robopolicy.yaml"
        shell:
            "paperflow robopolicy lara-seed --params {params.p:q} --data {input.data} --lam {input.lam} "
            "--seed {wildcards.rpseed} --models {output.models} --metrics {output.metrics} > {log} 2>&1"

else:

    rule robopolicy_train:
        input:
            data=f"{RP_DATA}/mv",
            lam=f"{RP_MODELS}/lam_s1/seed{{rpseed}}",
        output:
            directory(robopolicy_plan.model_dir(RP_MODELS, "{rpvariant}", "{rpseed}")),
        params:
            p=lambda w: as_json(robopolicy_plan.train_params(config["robopolicy"], w.rpvariant)),
        log:
            "logs/robopolicy/train/{rpvariant}-seed{rpseed}.log",
        benchmark:
            "benchmarks/robopolicy/train/{rpvariant}-seed{rpseed}.tsv"
        priority: robopolicy_plan.job_priority("train")
        threads: 1
        resources:
            **stage_resources("robopolicy", "train", mem_mb=3000, runtime=60),
        conda:
            "../envs/robopolicy.yaml"
        shell:
            "paperflow robopolicy train --params {params.p:q} --data {input.data} --lam {input.lam} "
            "--variant {wildcards.rpvariant} --seed {wildcards.rpseed} --out {output} > {log} 2>&1"


    rule robopolicy_evaluate:
        input:
            data=f"{RP_DATA}/mv",
            lam=f"{RP_MODELS}/lam_s1/seed{{rpseed}}",
            model=robopolicy_plan.model_dir(RP_MODELS, "{rpvariant}", "{rpseed}"),
        output:
            metrics=f"{robopolicy_plan.lara_eval_dir(RESULTS, '{rpvariant}', '{rpseed}')}/metrics.json",
            frames=f"{robopolicy_plan.lara_eval_dir(RESULTS, '{rpvariant}', '{rpseed}')}/frames.npz",
        params:
            p=lambda w: as_json(robopolicy_plan.eval_params(config["robopolicy"], w.rpvariant)),
        log:
            "logs/robopolicy/evaluate/{rpvariant}-seed{rpseed}.log",
        benchmark:
            "benchmarks/robopolicy/evaluate/{rpvariant}-seed{rpseed}.tsv"
        priority: robopolicy_plan.job_priority("evaluate")
        threads: 1
        resources:
            **stage_resources("robopolicy", "evaluate", mem_mb=3000, runtime=30),
        conda:
            "../envs/robopolicy.yaml"
        shell:
            "paperflow robopolicy evaluate --params {params.p:q} --data {input.data} --lam {input.lam} "
            "--model {input.model} --variant {wildcards.rpvariant} --seed {wildcards.rpseed} --out {output.metrics} "
            "> {log} 2>&1"


rule robopolicy_lara_report:
    input:
        data=f"{RP_DATA}/mv",
        metrics=lambda w: robopolicy_plan.lara_eval_paths(config["robopolicy"], RESULTS),
    output:
        metrics=f"{RP_RES}/lara/metrics.json",
        summary=f"{RP_RES}/lara/summary.md",
        success=report(f"{RP_RES}/lara/success.png", category="robopolicy", subcategory="LARA",
                       caption="../workflow/report/robopolicy.rst"),
        rollouts=report(f"{RP_RES}/lara/rollouts.png", category="robopolicy", subcategory="LARA",
                        caption="../workflow/report/robopolicy.rst"),
    params:
        p=lambda w: as_json(robopolicy_plan.lara_report_params(config["robopolicy"])),
        outdir=lambda w, output: os.path.dirname(output.metrics),
    log:
        "logs/robopolicy/lara_report.log",
    threads: 1
    resources:
        **stage_resources("robopolicy", "lara_report", mem_mb=2000, runtime=20),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy lara-report --params {params.p:q} --data {input.data} --metrics {input.metrics} "
        "--outdir {params.outdir} > {log} 2>&1"


rule robopolicy_gam_data:
    output:
        directory(robopolicy_plan.gam_data_dir(RP_DATA)),
    params:
        p=lambda w: as_json(robopolicy_plan.gam_data_params(config["robopolicy"])),
    log:
        "logs/robopolicy/gam_data.log",
    benchmark:
        "benchmarks/robopolicy/gam_data.tsv"
    threads: 1
    resources:
        **stage_resources("robopolicy", "gam_data", mem_mb=2000, runtime=20),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy gam-data --params {params.p:q} --out {output} > {log} 2>&1"


rule robopolicy_gam_run:
    input:
        unpack(lambda w: robopolicy_plan.gam_run_inputs(config["robopolicy"], RP_DATA)),
    output:
        f"{RP_RES}/gam/seeds/seed{{rpseed}}.json",
    params:
        p=lambda w: as_json(robopolicy_plan.gam_params(config["robopolicy"])),
        data=lambda w, input: f"--data {input.data}" if "data" in input.keys() else "",
    log:
        "logs/robopolicy/gam_run/seed{rpseed}.log",
    benchmark:
        "benchmarks/robopolicy/gam_run/seed{rpseed}.tsv"
    threads: 1
    resources:
        **stage_resources("robopolicy", "gam_run", mem_mb=1000, runtime=20),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy gam-run --params {params.p:q} --seed {wildcards.rpseed} {params.data} --out {output} > {log} 2>&1"


rule robopolicy_gam_report:
    input:
        lambda w: robopolicy_plan.gam_seed_paths(config["robopolicy"], RESULTS),
    output:
        metrics=f"{RP_RES}/gam/metrics.json",
        summary=f"{RP_RES}/gam/summary.md",
        success=report(f"{RP_RES}/gam/success.png", category="robopolicy", subcategory="GAM",
                       caption="../workflow/report/robopolicy.rst"),
        rollouts=report(f"{RP_RES}/gam/rollouts.png", category="robopolicy", subcategory="GAM",
                        caption="../workflow/report/robopolicy.rst"),
    params:
        p=lambda w: as_json(robopolicy_plan.gam_report_params(config["robopolicy"])),
        outdir=lambda w, output: os.path.dirname(output.metrics),
    log:
        "logs/robopolicy/gam_report.log",
    threads: 1
    resources:
        **stage_resources("robopolicy", "gam_report", mem_mb=1000, runtime=10),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy gam-report --params {params.p:q} --runs {input} --outdir {params.outdir} > {log} 2>&1"


rule robopolicy_summary:
    input:
        lambda w: robopolicy_plan.summaries(config["robopolicy"], RESULTS),
    output:
        f"{RP_RES}/robopolicy_summary.md",
    log:
        "logs/robopolicy/summary.log",
    threads: 1
    resources:
        **stage_resources("robopolicy", "summary", mem_mb=500, runtime=5),
    conda:
        "../envs/robopolicy.yaml"
    shell:
        "paperflow robopolicy summary --summaries {input} --out {output} > {log} 2>&1"
