# MPD-PAC (spec vision_language_a.md §1): data (synthetic scenes) -> train (tiny masked-diffusion backbone,
# one per seed) -> decode (one job per seed x decoding condition, every arm) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/mpdpac/stages.py; parameters: config["mpdpac"].
import os

from paperflow.mpdpac import plan as mpdpac_plan

MPDPAC = f"{RESULTS}/mpdpac"
MPDPAC_CONDS = "|".join(mpdpac_plan.conditions(config["mpdpac"])) or "none"

if "mpdpac" in ENABLED:
    STUDY_TARGETS["mpdpac"] = [f"{MPDPAC}/summary.md"] + [f"{MPDPAC}/figures/{f}" for f in mpdpac_plan.FIGURES]
    STUDY_SUMMARIES["mpdpac"] = f"{MPDPAC}/summary.md"


rule mpdpac_data:
    output:
        mpdpac_plan.data_path(config["data_dir"]),
    params:
        p=lambda w: as_json(mpdpac_plan.data_params(config["mpdpac"])),
    log:
        "logs/mpdpac/data.log",
    threads: 1
    resources:
        **stage_resources("mpdpac", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "paperflow mpdpac data --params {params.p:q} --out {output} > {log} 2>&1"


rule mpdpac_train:
    input:
        data=mpdpac_plan.data_path(config["data_dir"]),
    output:
        f"{config['models_dir']}/mpdpac/s{{seed}}/model.safetensors",
    params:
        p=lambda w: as_json(mpdpac_plan.train_params(config["mpdpac"], int(w.seed))),
        ckpt=lambda w, output: os.path.join(os.path.dirname(output[0]), "ckpt"),
    log:
        "logs/mpdpac/train/s{seed}.log",
    benchmark:
        "benchmarks/mpdpac/train/s{seed}.tsv"
    # two threads (spec §1 tiny profile: torch.set_num_threads(2)): the train job is the study's critical path and
    # runs alone; the weights depend on the thread count in the last bits (deterministic for a given count;
    # `--set-threads mpdpac_train=1` reproduces a one-thread run)
    threads: 2
    resources:
        **stage_resources("mpdpac", "train", mem_mb=2000, runtime=30),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "OMP_NUM_THREADS={threads} MKL_NUM_THREADS={threads} paperflow mpdpac train --params {params.p:q} --data {input.data} --out {output} --ckpt {params.ckpt} > {log} 2>&1"


rule mpdpac_decode:
    input:
        data=mpdpac_plan.data_path(config["data_dir"]),
        model=f"{config['models_dir']}/mpdpac/s{{seed}}/model.safetensors",
    output:
        f"{MPDPAC}/decode/s{{seed}}/{{mcond}}.json",
    params:
        p=lambda w: as_json(mpdpac_plan.evaluate_params(config["mpdpac"], int(w.seed), w.mcond)),
    log:
        "logs/mpdpac/decode/s{seed}_{mcond}.log",
    benchmark:
        "benchmarks/mpdpac/decode/s{seed}_{mcond}.tsv"
    wildcard_constraints:
        mcond=MPDPAC_CONDS,
    threads: 1
    resources:
        **stage_resources("mpdpac", "decode", mem_mb=3000, runtime=30),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "paperflow mpdpac decode --params {params.p:q} --data {input.data} --model {input.model} --out {output} > {log} 2>&1"


rule mpdpac_aggregate:
    input:
        lambda w: mpdpac_plan.eval_paths(config["mpdpac"], RESULTS),
    output:
        f"{MPDPAC}/metrics.json",
    log:
        "logs/mpdpac/aggregate.log",
    threads: 1
    resources:
        **stage_resources("mpdpac", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "paperflow mpdpac aggregate --out {output} {input} > {log} 2>&1"


rule mpdpac_figures:
    input:
        f"{MPDPAC}/metrics.json",
    output:
        report(
            expand(f"{MPDPAC}/figures/{{f}}", f=mpdpac_plan.FIGURES),
            category="mpdpac",
            caption="../workflow/report/mpdpac.rst",
        ),
    params:
        p=lambda w: as_json(config["mpdpac"]),
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/mpdpac/figures.log",
    threads: 1
    resources:
        **stage_resources("mpdpac", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "paperflow mpdpac figures --params {params.p:q} --metrics {input} --outdir {params.outdir} > {log} 2>&1"


rule mpdpac_summary:
    input:
        f"{MPDPAC}/metrics.json",
    output:
        f"{MPDPAC}/summary.md",
    params:
        p=lambda w: as_json(config["mpdpac"]),
    log:
        "logs/mpdpac/summary.log",
    threads: 1
    resources:
        **stage_resources("mpdpac", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/mpdpac.yaml"
    shell:
        "paperflow mpdpac summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
