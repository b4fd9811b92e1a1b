# consmsa: intra-/inter-modality consistency (I²CS) for MSA (spec vision_language_a.md §4; a reconstruction).
# data (synthetic MMSA feature pickle + role sidecar) -> train (a group of variants × one seed, with the
# test-time pruning controls of the keep = 1.0 model) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/consmsa/stages.py; parameters: config["consmsa"].
import os

from paperflow.consmsa import plan as consmsa_plan

CONSMSA_DATA = f"{config['data_dir']}/consmsa"
CONSMSA_RES = f"{RESULTS}/consmsa"
CONSMSA_MODELS = f"{config['models_dir']}/consmsa"
CONSMSA_SYNTH = config["consmsa"]["data"]["source"] == "synthetic"
CONSMSA_PICKLE = (f"{CONSMSA_DATA}/synth/synthetic.pkl" if CONSMSA_SYNTH
                  else config["consmsa"]["data"]["mmsa"]["path"])

if "consmsa" in ENABLED:
    STUDY_TARGETS["consmsa"] = [f"{CONSMSA_RES}/summary.md", f"{CONSMSA_RES}/figures/pruning_curve.png"]
    STUDY_SUMMARIES["consmsa"] = f"{CONSMSA_RES}/summary.md"


wildcard_constraints:
    cgroup=r"g\d+",


rule consmsa_data:
    output:
        pickle=f"{CONSMSA_DATA}/synth/synthetic.pkl",
        roles=f"{CONSMSA_DATA}/synth/roles.safetensors",
    params:
        p=lambda w: as_json(consmsa_plan.data_params(config["consmsa"])),
        out=lambda w, output: os.path.dirname(output.pickle),
    log:
        "logs/consmsa/data.log",
    benchmark:
        "benchmarks/consmsa/data.tsv"
    threads: 1
    resources:
        **stage_resources("consmsa", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/consmsa.yaml"
    shell:
        "paperflow consmsa data --params {params.p:q} --out {params.out} > {log} 2>&1"


rule consmsa_train:
    input:
        pickle=CONSMSA_PICKLE,
        roles=[f"{CONSMSA_DATA}/synth/roles.safetensors"] if CONSMSA_SYNTH else [],
    output:
        out=f"{CONSMSA_RES}/runs/{{cgroup}}/s{{seed}}.json",
    params:
        p=lambda w: as_json(consmsa_plan.train_params(config["consmsa"], w.cgroup, int(w.seed))),
        roles=lambda w, input: f"--roles {input.roles}" if input.roles else "",
        models=f"{CONSMSA_MODELS}",
        # resumable training state (core.checkpoint); removed by the stage once the job finishes
        ckpt=lambda w: f"{CONSMSA_MODELS}/ckpt/{w.cgroup}_s{w.seed}",
    log:
        "logs/consmsa/train/{cgroup}_s{seed}.log",
    benchmark:
        "benchmarks/consmsa/train/{cgroup}_s{seed}.tsv"
    threads: 1
    resources:
        **stage_resources("consmsa", "train", mem_mb=2000, runtime=30),
    conda:
        "../envs/consmsa.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow consmsa train --params {params.p:q} --pickle {input.pickle} {params.roles} "
        "--out {output.out} --models {params.models}/{wildcards.cgroup}_s{wildcards.seed} "
        "--ckpt {params.ckpt} > {log} 2>&1"


rule consmsa_aggregate:
    input:
        lambda w: [f"{CONSMSA_RES}/runs/{g}/s{s}.json" for g, s in consmsa_plan.jobs(config["consmsa"])],
    output:
        f"{CONSMSA_RES}/metrics.json",
    log:
        "logs/consmsa/aggregate.log",
    threads: 1
    resources:
        **stage_resources("consmsa", "aggregate", mem_mb=2000, runtime=10),
    conda:
        "../envs/consmsa.yaml"
    shell:
        "paperflow consmsa aggregate --out {output} {input} > {log} 2>&1"


rule consmsa_figures:
    input:
        f"{CONSMSA_RES}/metrics.json",
    output:
        report(f"{CONSMSA_RES}/figures/pruning_curve.png", category="consmsa",
               caption="../workflow/report/consmsa.rst"),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/consmsa/figures.log",
    threads: 1
    resources:
        **stage_resources("consmsa", "figures", mem_mb=2000, runtime=10),
    conda:
        "../envs/consmsa.yaml"
    shell:
        "paperflow consmsa figures --metrics {input} --outdir {params.outdir} > {log} 2>&1"


rule consmsa_summary:
    input:
        f"{CONSMSA_RES}/metrics.json",
    output:
        f"{CONSMSA_RES}/summary.md",
    params:
        p=lambda w: as_json(config["consmsa"]),
    log:
        "logs/consmsa/summary.log",
    threads: 1
    resources:
        **stage_resources("consmsa", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/consmsa.yaml"
    shell:
        "paperflow consmsa summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
