# hyper_icl: Hyper-ICL (spec vision_language_b §5; a reconstruction from the abstract).
# data (episodes of the tiny attribute world) -> base (small transformer, once per seed) -> arms (seed x group
# of arms, every target task: train student modules, evaluate) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/hyper_icl/stages.py; parameters: config["hyper_icl"].
import os

from paperflow.hyper_icl import plan as hyper_icl_plan

HYPER_ICL_DATA = f"{config['data_dir']}/hyper_icl/episodes"
HYPER_ICL_RES = f"{RESULTS}/hyper_icl"
HYPER_ICL_MODELS = f"{config['models_dir']}/hyper_icl"

if "hyper_icl" in ENABLED:
    STUDY_TARGETS["hyper_icl"] = [f"{HYPER_ICL_RES}/summary.md", f"{HYPER_ICL_RES}/figures/accuracy_by_arm.png"]
    STUDY_SUMMARIES["hyper_icl"] = f"{HYPER_ICL_RES}/summary.md"


rule hyper_icl_data:
    output:
        directory(HYPER_ICL_DATA),
    params:
        p=lambda w: as_json(hyper_icl_plan.data_params(config["hyper_icl"])),
    log:
        "logs/hyper_icl/data.log",
    benchmark:
        "benchmarks/hyper_icl/data.tsv"
    threads: 1
    resources:
        **stage_resources("hyper_icl", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "paperflow hyper_icl data --params {params.p:q} --out {output} > {log} 2>&1"


rule hyper_icl_base:
    input:
        data=HYPER_ICL_DATA,
    output:
        weights=f"{HYPER_ICL_MODELS}/s{{seed}}/base.safetensors",
        out=f"{HYPER_ICL_RES}/base/s{{seed}}.json",
    params:
        p=lambda w: as_json(hyper_icl_plan.base_params(config["hyper_icl"], int(w.seed))),
        # resumable training state (core.checkpoint); removed by the stage once the model is written
        ckpt=lambda w, output: os.path.join(os.path.dirname(output.weights), "ckpt"),
    log:
        "logs/hyper_icl/base/s{seed}.log",
    benchmark:
        "benchmarks/hyper_icl/base/s{seed}.tsv"
    # every seed's base before any arms job (scheduling only): 2 cores then never run the last seed's arms
    # alone at the end (measured: hyper_icl idle took 312 s with seed 0's base and arms last)
    priority: 1
    threads: 1
    resources:
        **stage_resources("hyper_icl", "base", mem_mb=2000, runtime=30),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow hyper_icl base --params {params.p:q} --data {input.data} --weights {output.weights} "
        "--out {output.out} --ckpt {params.ckpt} > {log} 2>&1"


rule hyper_icl_arms:
    input:
        data=HYPER_ICL_DATA,
        weights=f"{HYPER_ICL_MODELS}/s{{seed}}/base.safetensors",
    output:
        f"{HYPER_ICL_RES}/arms/s{{seed}}/c{{chunk}}.json",
    params:
        p=lambda w: as_json(hyper_icl_plan.arms_params(config["hyper_icl"], int(w.seed), int(w.chunk))),
    log:
        "logs/hyper_icl/arms/s{seed}_c{chunk}.log",
    benchmark:
        "benchmarks/hyper_icl/arms/s{seed}_c{chunk}.tsv"
    threads: 1
    resources:
        **stage_resources("hyper_icl", "arms", mem_mb=2000, runtime=30),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow hyper_icl arms --params {params.p:q} --data {input.data} --weights {input.weights} "
        "--out {output} > {log} 2>&1"


rule hyper_icl_aggregate:
    input:
        jobs=lambda w: [f"{HYPER_ICL_RES}/arms/s{s}/c{c}.json" for s, c in hyper_icl_plan.arm_jobs(config["hyper_icl"])],
        bases=lambda w: [f"{HYPER_ICL_RES}/base/s{s}.json" for s in hyper_icl_plan.seeds(config["hyper_icl"])],
    output:
        f"{HYPER_ICL_RES}/metrics.json",
    log:
        "logs/hyper_icl/aggregate.log",
    threads: 1
    resources:
        **stage_resources("hyper_icl", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "paperflow hyper_icl aggregate --bases {input.bases} --out {output} {input.jobs} > {log} 2>&1"


rule hyper_icl_figures:
    input:
        f"{HYPER_ICL_RES}/metrics.json",
    output:
        report(
            f"{HYPER_ICL_RES}/figures/accuracy_by_arm.png",
            category="hyper_icl",
            caption="../workflow/report/hyper_icl.rst",
        ),
    params:
        p=lambda w: as_json(config["hyper_icl"]),
    log:
        "logs/hyper_icl/figures.log",
    threads: 1
    resources:
        **stage_resources("hyper_icl", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "paperflow hyper_icl figures --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"


rule hyper_icl_summary:
    input:
        f"{HYPER_ICL_RES}/metrics.json",
    output:
        f"{HYPER_ICL_RES}/summary.md",
    params:
        p=lambda w: as_json(config["hyper_icl"]),
    log:
        "logs/hyper_icl/summary.log",
    threads: 1
    resources:
        **stage_resources("hyper_icl", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/hyper_icl.yaml"
    shell:
        "paperflow hyper_icl summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
