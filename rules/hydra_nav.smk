# hydra_nav: adaptive slow/fast reasoning for object navigation (spec vision_language_b.md §8; a reconstruction).
# data (houses as ObjectNav-style episode files) -> irft (per seed: train the learned trigger for every cost,
# evaluate it on the test houses) + baselines (fixed policies (a)-(d), several per job) -> aggregate ->
# figures, summary. Stage functions: src/paperflow/hydra_nav/stages.py; parameters: config["hydra_nav"].
import os

from paperflow.hydra_nav import plan as hydra_nav_plan

HYDRA_NAV_DATA = f"{config['data_dir']}/hydra_nav"
HYDRA_NAV_RES = f"{RESULTS}/hydra_nav"
HYDRA_NAV_MODELS = f"{config['models_dir']}/hydra_nav"
HYDRA_NAV_FIGURES = ["sot_vs_cost.png"]

if "hydra_nav" in ENABLED:
    STUDY_TARGETS["hydra_nav"] = [f"{HYDRA_NAV_RES}/summary.md"] + [f"{HYDRA_NAV_RES}/figures/{f}" for f in HYDRA_NAV_FIGURES]
    STUDY_SUMMARIES["hydra_nav"] = f"{HYDRA_NAV_RES}/summary.md"


rule hydra_nav_data:
    output:
        directory(f"{HYDRA_NAV_DATA}/episodes"),
    params:
        p=lambda w: as_json(hydra_nav_plan.data_params(config["hydra_nav"])),
    log:
        "logs/hydra_nav/data.log",
    benchmark:
        "benchmarks/hydra_nav/data.tsv"
    threads: 1
    resources:
        **stage_resources("hydra_nav", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav data --params {params.p:q} --out {output} > {log} 2>&1"


rule hydra_nav_irft:
    input:
        episodes=f"{HYDRA_NAV_DATA}/episodes",
    output:
        model=f"{HYDRA_NAV_MODELS}/irft/s{{seed}}.json",
        out=f"{HYDRA_NAV_RES}/eval/irft_s{{seed}}.json",
    params:
        p=lambda w: as_json(hydra_nav_plan.irft_params(config["hydra_nav"], int(w.seed))),
    log:
        "logs/hydra_nav/irft/s{seed}.log",
    benchmark:
        "benchmarks/hydra_nav/irft/s{seed}.tsv"
    threads: 1
    resources:
        **stage_resources("hydra_nav", "irft", mem_mb=1000, runtime=30),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav irft --params {params.p:q} --episodes {input.episodes} --model {output.model} "
        "--out {output.out} > {log} 2>&1"


rule hydra_nav_baselines:
    input:
        episodes=f"{HYDRA_NAV_DATA}/episodes",
    output:
        f"{HYDRA_NAV_RES}/eval/baselines_g{{group}}.json",
    params:
        p=lambda w: as_json(hydra_nav_plan.baselines_params(config["hydra_nav"], int(w.group))),
    log:
        "logs/hydra_nav/baselines/g{group}.log",
    benchmark:
        "benchmarks/hydra_nav/baselines/g{group}.tsv"
    threads: 1
    resources:
        **stage_resources("hydra_nav", "baselines", mem_mb=1000, runtime=30),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav baselines --params {params.p:q} --episodes {input.episodes} --out {output} > {log} 2>&1"


rule hydra_nav_aggregate:
    input:
        irft=lambda w: [f"{HYDRA_NAV_RES}/eval/irft_s{s}.json" for s in hydra_nav_plan.seeds(config["hydra_nav"])],
        models=lambda w: [f"{HYDRA_NAV_MODELS}/irft/s{s}.json" for s in hydra_nav_plan.seeds(config["hydra_nav"])],
        baselines=lambda w: [f"{HYDRA_NAV_RES}/eval/baselines_g{g}.json"
                             for g in range(len(hydra_nav_plan.baseline_groups(config["hydra_nav"])))],
    output:
        f"{HYDRA_NAV_RES}/metrics.json",
    params:
        p=lambda w: as_json(config["hydra_nav"]),
    log:
        "logs/hydra_nav/aggregate.log",
    threads: 1
    resources:
        **stage_resources("hydra_nav", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav aggregate --params {params.p:q} --irft {input.irft} --baselines {input.baselines} "
        "--models {input.models} --out {output} > {log} 2>&1"


rule hydra_nav_figures:
    input:
        f"{HYDRA_NAV_RES}/metrics.json",
    output:
        report(
            expand(f"{HYDRA_NAV_RES}/figures/{{f}}", f=HYDRA_NAV_FIGURES),
            category="hydra_nav",
            caption="../workflow/report/hydra_nav.rst",
        ),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/hydra_nav/figures.log",
    threads: 1
    resources:
        **stage_resources("hydra_nav", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav figures --metrics {input} --outdir {params.outdir} > {log} 2>&1"


rule hydra_nav_summary:
    input:
        f"{HYDRA_NAV_RES}/metrics.json",
    output:
        f"{HYDRA_NAV_RES}/summary.md",
    params:
        p=lambda w: as_json(config["hydra_nav"]),
    log:
        "logs/hydra_nav/summary.log",
    threads: 1
    resources:
        **stage_resources("hydra_nav", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/hydra_nav.yaml"
    shell:
        "paperflow hydra_nav summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
