# expalign: expectation-alignment head + top-K multi-positive loss + GACO (spec vision_language_a §2).
# synth (synthetic only) -> prep (COCO/LVIS loader; train/val/test, val only for bench/expalign_select.py) -> text (MiniLM, once) -> train (arm x seed)
# -> evaluate (per seed) -> aggregate -> figures, summary. Logic: src/paperflow/expalign.
import os

from paperflow.expalign import plan as expalign_plan

EXPALIGN_DATA = f"{config['data_dir']}/expalign/{expalign_plan.name(config['expalign'])}"
EXPALIGN_RES = f"{RESULTS}/expalign"
EXPALIGN_FIGURES = ["heatmaps.png", "metrics_by_arm.png"]

if "expalign" in ENABLED:
    STUDY_TARGETS["expalign"] = [f"{EXPALIGN_RES}/summary.md"] + [
        f"{EXPALIGN_RES}/figures/{f}" for f in EXPALIGN_FIGURES
    ]
    STUDY_SUMMARIES["expalign"] = f"{EXPALIGN_RES}/summary.md"


wildcard_constraints:
    ea_arm=r"[A-Za-z0-9_]+",
    ea_seed=r"\d+",


rule expalign_synth:
    output:
        train_json=f"{EXPALIGN_DATA}/raw/annotations_train.json",
        train_images=f"{EXPALIGN_DATA}/raw/images_train.npy",
        val_json=f"{EXPALIGN_DATA}/raw/annotations_val.json",
        val_images=f"{EXPALIGN_DATA}/raw/images_val.npy",
        test_json=f"{EXPALIGN_DATA}/raw/annotations_test.json",
        test_images=f"{EXPALIGN_DATA}/raw/images_test.npy",
    params:
        p=lambda w: as_json(expalign_plan.synth_params(config["expalign"])),
        outdir=lambda w, output: os.path.dirname(output.train_json),
    log:
        "logs/expalign/synth.log",
    threads: 1
    resources:
        **stage_resources("expalign", "synth", mem_mb=1000, runtime=10),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign synth --params {params.p:q} --outdir {params.outdir} > {log} 2>&1"


rule expalign_prep:
    input:
        **expalign_plan.raw_paths(config["expalign"], config["data_dir"]),
    output:
        train=f"{EXPALIGN_DATA}/train.safetensors",
        val=f"{EXPALIGN_DATA}/val.safetensors",
        test=f"{EXPALIGN_DATA}/test.safetensors",
        meta=f"{EXPALIGN_DATA}/meta.json",
    params:
        p=lambda w: as_json(expalign_plan.prep_params(config["expalign"])),
        outdir=lambda w, output: os.path.dirname(output.meta),
    log:
        "logs/expalign/prep.log",
    threads: 1
    resources:
        **stage_resources("expalign", "prep", mem_mb=2000, runtime=20),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign prep --params {params.p:q} --train-json {input.train_json}"
        " --train-images {input.train_images} --val-json {input.val_json} --val-images {input.val_images}"
        " --test-json {input.test_json}"
        " --test-images {input.test_images} --outdir {params.outdir} > {log} 2>&1"


rule expalign_text:
    input:
        meta=f"{EXPALIGN_DATA}/meta.json",
    output:
        f"{EXPALIGN_DATA}/text.safetensors",
    params:
        p=lambda w: as_json(expalign_plan.text_params(config["expalign"])),
    log:
        "logs/expalign/text.log",
    threads: 1
    resources:
        **stage_resources("expalign", "text", mem_mb=2000, runtime=10),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign text --params {params.p:q} --meta {input.meta} --out {output} > {log} 2>&1"


rule expalign_train:
    input:
        data=f"{EXPALIGN_DATA}/train.safetensors",
        text=f"{EXPALIGN_DATA}/text.safetensors",
    output:
        f"{config['models_dir']}/expalign/{expalign_plan.name(config['expalign'])}/{{ea_arm}}/s{{ea_seed}}/model.safetensors",
    params:
        p=lambda w: as_json(expalign_plan.train_params(config["expalign"], w.ea_arm, int(w.ea_seed))),
    log:
        "logs/expalign/train/{ea_arm}_s{ea_seed}.log",
    benchmark:
        "benchmarks/expalign/train/{ea_arm}_s{ea_seed}.tsv"
    threads: 1
    resources:
        **stage_resources("expalign", "train", mem_mb=2000, runtime=30),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign train --params {params.p:q} --data {input.data} --text {input.text}"
        " --out {output} > {log} 2>&1"


rule expalign_evaluate:
    input:
        test=f"{EXPALIGN_DATA}/test.safetensors",
        meta=f"{EXPALIGN_DATA}/meta.json",
        text=f"{EXPALIGN_DATA}/text.safetensors",
        models=lambda w: expalign_plan.model_paths(config["models_dir"], config["expalign"], int(w.ea_seed)),
    output:
        runs=f"{EXPALIGN_RES}/runs/{expalign_plan.name(config['expalign'])}/s{{ea_seed}}.json",
        examples=f"{EXPALIGN_RES}/runs/{expalign_plan.name(config['expalign'])}/s{{ea_seed}}.examples.safetensors",
    params:
        p=lambda w: as_json(expalign_plan.eval_params(config["expalign"], int(w.ea_seed))),
    log:
        "logs/expalign/evaluate/s{ea_seed}.log",
    benchmark:
        "benchmarks/expalign/evaluate/s{ea_seed}.tsv"
    threads: 1
    resources:
        **stage_resources("expalign", "evaluate", mem_mb=2000, runtime=20),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign evaluate --params {params.p:q} --test {input.test} --meta {input.meta}"
        " --text {input.text} --models {input.models} --out {output.runs} > {log} 2>&1"


rule expalign_aggregate:
    input:
        runs=lambda w: expalign_plan.eval_paths(RESULTS, config["expalign"]),
        meta=f"{EXPALIGN_DATA}/meta.json",
    output:
        f"{EXPALIGN_RES}/metrics.json",
    log:
        "logs/expalign/aggregate.log",
    threads: 1
    resources:
        **stage_resources("expalign", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign aggregate --meta {input.meta} --out {output} {input.runs} > {log} 2>&1"


rule expalign_figures:
    input:
        metrics=f"{EXPALIGN_RES}/metrics.json",
        examples=lambda w: expalign_plan.eval_paths(RESULTS, config["expalign"])[0].replace(
            ".json", ".examples.safetensors"
        ),
        meta=f"{EXPALIGN_DATA}/meta.json",
    output:
        report(
            expand(f"{EXPALIGN_RES}/figures/{{f}}", f=EXPALIGN_FIGURES),
            category="expalign",
            caption="../workflow/report/expalign.rst",
        ),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/expalign/figures.log",
    threads: 1
    resources:
        **stage_resources("expalign", "figures", mem_mb=2000, runtime=10),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign figures --metrics {input.metrics} --examples {input.examples}"
        " --meta {input.meta} --outdir {params.outdir} > {log} 2>&1"


rule expalign_summary:
    input:
        f"{EXPALIGN_RES}/metrics.json",
    output:
        f"{EXPALIGN_RES}/summary.md",
    params:
        p=lambda w: as_json(config["expalign"]),
    log:
        "logs/expalign/summary.log",
    threads: 1
    resources:
        **stage_resources("expalign", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/expalign.yaml"
    shell:
        "paperflow expalign summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
