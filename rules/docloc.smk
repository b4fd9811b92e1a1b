# docloc: JKO evidence localisation for document VQA (spec doc_localization.md; a reconstruction).
# data (synthetic pages) -> prep (validated line-token features) -> train (arm × seed, evaluated on
# val / test_id / test_ood) + mechanics (fixed potentials) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/docloc/stages.py; parameters: config["docloc"].
import os

from paperflow.docloc import plan as docloc_plan

DOCLOC_DATA = f"{config['data_dir']}/docloc"
DOCLOC_RES = f"{RESULTS}/docloc"
DOCLOC_MODELS = f"{config['models_dir']}/docloc"
DOCLOC_FIGURES = ["iou_by_stage.png", "evidence_maps.png", "mechanics.png"]
DOCLOC_MECH = [f"{DOCLOC_RES}/mechanics.json"] if config["docloc"]["mechanics"]["enabled"] else []

if "docloc" in ENABLED:
    STUDY_TARGETS["docloc"] = [f"{DOCLOC_RES}/summary.md"] + [f"{DOCLOC_RES}/figures/{f}" for f in DOCLOC_FIGURES]
    STUDY_SUMMARIES["docloc"] = f"{DOCLOC_RES}/summary.md"


wildcard_constraints:
    dvariant=r"(single|now2|jko_b|jko_a|poe)(_t[0-9.e-]+_K\d+)?",


rule docloc_data:
    output:
        directory(f"{DOCLOC_DATA}/synth"),
    params:
        p=lambda w: as_json(docloc_plan.data_params(config["docloc"])),
    log:
        "logs/docloc/data.log",
    benchmark:
        "benchmarks/docloc/data.tsv"
    threads: 1
    resources:
        **stage_resources("docloc", "data", mem_mb=1000, runtime=20),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc data --params {params.p:q} --out {output} > {log} 2>&1"


rule docloc_prep:
    input:
        synthetic=[f"{DOCLOC_DATA}/synth"] if config["docloc"]["data"]["source"] == "synthetic" else [],
    output:
        directory(f"{DOCLOC_DATA}/features"),
    params:
        p=lambda w: as_json(docloc_plan.prep_params(config["docloc"])),
        synthetic=lambda w, input: f"--synthetic {input.synthetic}" if input.synthetic else "",
    log:
        "logs/docloc/prep.log",
    benchmark:
        "benchmarks/docloc/prep.tsv"
    threads: 1
    resources:
        **stage_resources("docloc", "prep", mem_mb=2000, runtime=30),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc prep --params {params.p:q} {params.synthetic} --out {output} > {log} 2>&1"


rule docloc_train:
    input:
        features=f"{DOCLOC_DATA}/features",
    output:
        out=f"{DOCLOC_RES}/runs/{{dvariant}}/s{{seed}}.json",
        examples=f"{DOCLOC_RES}/runs/{{dvariant}}/s{{seed}}.examples.npz",
        weights=f"{DOCLOC_MODELS}/{{dvariant}}/s{{seed}}/model.safetensors",
    params:
        p=lambda w: as_json(docloc_plan.train_params(config["docloc"], w.dvariant, int(w.seed))),
        # resumable training state (core.checkpoint); not an output: it survives a killed job and is
        # removed by the stage once the run is evaluated
        ckpt=lambda w, output: os.path.join(os.path.dirname(output.weights), "ckpt"),
    log:
        "logs/docloc/train/{dvariant}_s{seed}.log",
    benchmark:
        "benchmarks/docloc/train/{dvariant}_s{seed}.tsv"
    threads: 1
    resources:
        **stage_resources("docloc", "train", mem_mb=2000, runtime=60),
    conda:
        "../envs/docloc.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow docloc train --params {params.p:q} --features {input.features} --out {output.out} "
        "--weights {output.weights} --ckpt {params.ckpt} --examples {output.examples} > {log} 2>&1"


rule docloc_mechanics:
    output:
        f"{DOCLOC_RES}/mechanics.json",
    params:
        p=lambda w: as_json(docloc_plan.mechanics_params(config["docloc"])),
    log:
        "logs/docloc/mechanics.log",
    benchmark:
        "benchmarks/docloc/mechanics.tsv"
    threads: 1
    resources:
        **stage_resources("docloc", "mechanics", mem_mb=2000, runtime=30),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc mechanics --params {params.p:q} --out {output} > {log} 2>&1"


rule docloc_aggregate:
    input:
        runs=lambda w: [f"{DOCLOC_RES}/runs/{v}/s{s}.json" for v, s in docloc_plan.runs(config["docloc"])],
        mechanics=DOCLOC_MECH,
    output:
        f"{DOCLOC_RES}/metrics.json",
    params:
        mechanics=lambda w, input: f"--mechanics {input.mechanics}" if input.mechanics else "",
    log:
        "logs/docloc/aggregate.log",
    threads: 1
    resources:
        **stage_resources("docloc", "aggregate", mem_mb=2000, runtime=10),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc aggregate {params.mechanics} --out {output} {input.runs} > {log} 2>&1"


rule docloc_figures:
    input:
        metrics=f"{DOCLOC_RES}/metrics.json",
        features=f"{DOCLOC_DATA}/features",
        examples=lambda w: [f"{DOCLOC_RES}/runs/{v}/s{s}.examples.npz" for v, s in docloc_plan.runs(config["docloc"])],
    output:
        report(
            expand(f"{DOCLOC_RES}/figures/{{f}}", f=DOCLOC_FIGURES),
            category="docloc",
            caption="../workflow/report/docloc.rst",
        ),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/docloc/figures.log",
    threads: 1
    resources:
        **stage_resources("docloc", "figures", mem_mb=2000, runtime=10),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc figures --metrics {input.metrics} --features {input.features} "
        "--examples {input.examples} --outdir {params.outdir} > {log} 2>&1"


rule docloc_summary:
    input:
        f"{DOCLOC_RES}/metrics.json",
    output:
        f"{DOCLOC_RES}/summary.md",
    params:
        p=lambda w: as_json(config["docloc"]),
    log:
        "logs/docloc/summary.log",
    threads: 1
    resources:
        **stage_resources("docloc", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/docloc.yaml"
    shell:
        "paperflow docloc summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
