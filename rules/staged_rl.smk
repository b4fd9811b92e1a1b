# staged_rl: From Seeing to Thinking, staged perception -> text -> visual reasoning RL (spec vision_language_b §6).
# data (slot world, RL and test sets) -> base (warm-up + perception filter, once per seed) -> arms (seed x group
# of arms: RL stages from the base, evaluated after every stage) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/staged_rl/stages.py; parameters: config["staged_rl"].
import os

from paperflow.staged_rl import plan as staged_rl_plan

STAGED_RL_DATA = f"{config['data_dir']}/staged_rl/world"
STAGED_RL_RES = f"{RESULTS}/staged_rl"
STAGED_RL_MODELS = f"{config['models_dir']}/staged_rl"

if "staged_rl" in ENABLED:
    STUDY_TARGETS["staged_rl"] = [f"{STAGED_RL_RES}/summary.md", f"{STAGED_RL_RES}/figures/accuracy_by_arm_and_stage.png"]
    STUDY_SUMMARIES["staged_rl"] = f"{STAGED_RL_RES}/summary.md"


rule staged_rl_data:
    output:
        directory(STAGED_RL_DATA),
    params:
        p=lambda w: as_json(staged_rl_plan.data_params(config["staged_rl"])),
    log:
        "logs/staged_rl/data.log",
    benchmark:
        "benchmarks/staged_rl/data.tsv"
    threads: 1
    resources:
        **stage_resources("staged_rl", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "paperflow staged_rl data --params {params.p:q} --out {output} > {log} 2>&1"


rule staged_rl_base:
    input:
        data=STAGED_RL_DATA,
    output:
        weights=f"{STAGED_RL_MODELS}/s{{seed}}/base.safetensors",
        out=f"{STAGED_RL_RES}/base/s{{seed}}.json",
    params:
        p=lambda w: as_json(staged_rl_plan.base_params(config["staged_rl"], int(w.seed))),
        # resumable training state (core.checkpoint); removed by the stage once the model is written
        ckpt=lambda w, output: os.path.join(os.path.dirname(output.weights), "ckpt"),
    log:
        "logs/staged_rl/base/s{seed}.log",
    benchmark:
        "benchmarks/staged_rl/base/s{seed}.tsv"
    # every seed's base before any arms job (scheduling only): 2 cores then never run the last seed's arms
    # alone at the end (measured: hyper_icl idle took 312 s with seed 0's base and arms last)
    priority: 1
    threads: 1
    resources:
        **stage_resources("staged_rl", "base", mem_mb=2000, runtime=30),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow staged_rl base --params {params.p:q} --data {input.data} --weights {output.weights} "
        "--out {output.out} --ckpt {params.ckpt} > {log} 2>&1"


rule staged_rl_arms:
    input:
        data=STAGED_RL_DATA,
        weights=f"{STAGED_RL_MODELS}/s{{seed}}/base.safetensors",
        base=f"{STAGED_RL_RES}/base/s{{seed}}.json",
    output:
        f"{STAGED_RL_RES}/arms/s{{seed}}/c{{chunk}}.json",
    params:
        p=lambda w: as_json(staged_rl_plan.arms_params(config["staged_rl"], int(w.seed), int(w.chunk))),
        # grpo_lite: finished arms and the current arm's training state (core.checkpoint); removed by the stage
        # once the output is written
        ckpt=lambda w: f"{STAGED_RL_MODELS}/s{w.seed}/arms_c{w.chunk}_ckpt",
    log:
        "logs/staged_rl/arms/s{seed}_c{chunk}.log",
    benchmark:
        "benchmarks/staged_rl/arms/s{seed}_c{chunk}.tsv"
    threads: 1
    resources:
        **stage_resources("staged_rl", "arms", mem_mb=2000, runtime=30),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow staged_rl arms --params {params.p:q} --data {input.data} --weights {input.weights} "
        "--base {input.base} --out {output} --ckpt {params.ckpt} > {log} 2>&1"


rule staged_rl_aggregate:
    input:
        jobs=lambda w: [f"{STAGED_RL_RES}/arms/s{s}/c{c}.json" for s, c in staged_rl_plan.arm_jobs(config["staged_rl"])],
        bases=lambda w: [f"{STAGED_RL_RES}/base/s{s}.json" for s in staged_rl_plan.seeds(config["staged_rl"])],
    output:
        f"{STAGED_RL_RES}/metrics.json",
    log:
        "logs/staged_rl/aggregate.log",
    threads: 1
    resources:
        **stage_resources("staged_rl", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "paperflow staged_rl aggregate --bases {input.bases} --out {output} {input.jobs} > {log} 2>&1"


rule staged_rl_figures:
    input:
        f"{STAGED_RL_RES}/metrics.json",
    output:
        report(
            f"{STAGED_RL_RES}/figures/accuracy_by_arm_and_stage.png",
            category="staged_rl",
            caption="../workflow/report/staged_rl.rst",
        ),
    params:
        p=lambda w: as_json(config["staged_rl"]),
    log:
        "logs/staged_rl/figures.log",
    threads: 1
    resources:
        **stage_resources("staged_rl", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "paperflow staged_rl figures --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"


rule staged_rl_summary:
    input:
        f"{STAGED_RL_RES}/metrics.json",
    output:
        f"{STAGED_RL_RES}/summary.md",
    params:
        p=lambda w: as_json(config["staged_rl"]),
    log:
        "logs/staged_rl/summary.log",
    threads: 1
    resources:
        **stage_resources("staged_rl", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/staged_rl.yaml"
    shell:
        "paperflow staged_rl summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
