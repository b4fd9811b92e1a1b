# PIAA (training-free multi-label; spec vision_language_a.md §3): generate → prepare → text → train (per
# seed) → evaluate (per seed) → aggregate → figures → summary. Logic: src/paperflow/piaa; config["piaa"].
from paperflow.piaa import plan as piaa_plan

PIAA_RES = f"{RESULTS}/piaa"
PIAA_DATA = piaa_plan.data_dir(config["piaa"], config["data_dir"])
PIAA_MODELS = piaa_plan.data_dir(config["piaa"], config["models_dir"])
PIAA_FIGURES = ["map_by_tercile.png", "temperature_grid.png", "patch_maps.png"]
PIAA_SYNTH = piaa_plan.synthetic(config["piaa"])

if "piaa" in ENABLED:
    STUDY_TARGETS["piaa"] = [f"{PIAA_RES}/summary.md"] + [f"{PIAA_RES}/figures/{f}" for f in PIAA_FIGURES]
    STUDY_SUMMARIES["piaa"] = f"{PIAA_RES}/summary.md"


rule piaa_generate:
    output:
        directory(f"{PIAA_DATA}/raw"),
    params:
        p=lambda w: as_json(piaa_plan.generate_params(config["piaa"])),
    log:
        "logs/piaa/generate.log",
    benchmark:
        "benchmarks/piaa/generate.tsv"
    threads: 1
    resources:
        **stage_resources("piaa", "generate", mem_mb=1000, runtime=10),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa generate --params {params.p:q} --out {output} > {log} 2>&1"


rule piaa_prepare:
    input:
        [f"{PIAA_DATA}/raw"] if PIAA_SYNTH else [],
    output:
        directory(f"{PIAA_DATA}/prepared"),
    params:
        p=lambda w: as_json(piaa_plan.prepare_params(config["piaa"])),
        raw=lambda w, input: f"--raw {input[0]}" if len(input) else "",
    log:
        "logs/piaa/prepare.log",
    benchmark:
        "benchmarks/piaa/prepare.tsv"
    threads: 1
    resources:
        **stage_resources("piaa", "prepare", mem_mb=2000, runtime=20),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa prepare --params {params.p:q} {params.raw} --out {output} > {log} 2>&1"


rule piaa_text:
    input:
        f"{PIAA_DATA}/prepared",
    output:
        f"{PIAA_DATA}/text.safetensors",
    params:
        p=lambda w: as_json(piaa_plan.text_params(config["piaa"])),
    log:
        "logs/piaa/text.log",
    benchmark:
        "benchmarks/piaa/text.tsv"
    threads: 1
    resources:
        **stage_resources("piaa", "text", mem_mb=2000, runtime=10),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa text --params {params.p:q} --data {input} --out {output} > {log} 2>&1"


rule piaa_train:
    input:
        data=f"{PIAA_DATA}/prepared",
        text=f"{PIAA_DATA}/text.safetensors",
    output:
        directory(f"{PIAA_MODELS}/s{{seed}}"),
    params:
        p=lambda w: as_json(piaa_plan.train_params(config["piaa"], int(w.seed))),
        ckpt=lambda w: f"{PIAA_MODELS}/ckpt/s{w.seed}",
    log:
        "logs/piaa/train/s{seed}.log",
    benchmark:
        "benchmarks/piaa/train/s{seed}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: 1
    resources:
        **stage_resources("piaa", "train", mem_mb=2000, runtime=30),
    conda:
        "../envs/piaa.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- paperflow piaa train "
        "--params {params.p:q} --data {input.data} --text {input.text} --ckpt {params.ckpt} --out {output} "
        "> {log} 2>&1"


rule piaa_evaluate:
    input:
        data=f"{PIAA_DATA}/prepared",
        text=f"{PIAA_DATA}/text.safetensors",
        model=f"{PIAA_MODELS}/s{{seed}}",
    output:
        f"{PIAA_RES}/runs/s{{seed}}.json",
    params:
        p=lambda w: as_json(piaa_plan.eval_params(config["piaa"], int(w.seed))),
    log:
        "logs/piaa/evaluate/s{seed}.log",
    benchmark:
        "benchmarks/piaa/evaluate/s{seed}.tsv"
    wildcard_constraints:
        seed=r"\d+",
    threads: 1
    resources:
        **stage_resources("piaa", "evaluate", mem_mb=3000, runtime=20),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa evaluate --params {params.p:q} --data {input.data} --text {input.text} "
        "--model {input.model} --out {output} > {log} 2>&1"


rule piaa_aggregate:
    input:
        runs=lambda w: [f"{PIAA_RES}/runs/s{s}.json" for s in piaa_plan.seeds(config["piaa"])],
        models=lambda w: [f"{PIAA_MODELS}/s{s}" for s in piaa_plan.seeds(config["piaa"])],
    output:
        f"{PIAA_RES}/metrics.json",
    log:
        "logs/piaa/aggregate.log",
    threads: 1
    resources:
        **stage_resources("piaa", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa aggregate --out {output} {input.runs} --train {input.models} > {log} 2>&1"


rule piaa_figures:
    input:
        f"{PIAA_RES}/metrics.json",
    output:
        report(
            expand(f"{PIAA_RES}/figures/{{f}}", f=PIAA_FIGURES),
            category="piaa",
            caption="../workflow/report/piaa.rst",
        ),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/piaa/figures.log",
    threads: 1
    resources:
        **stage_resources("piaa", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa figures --metrics {input} --outdir {params.outdir} > {log} 2>&1"


rule piaa_summary:
    input:
        f"{PIAA_RES}/metrics.json",
    output:
        f"{PIAA_RES}/summary.md",
    params:
        p=lambda w: as_json(config["piaa"]),
    log:
        "logs/piaa/summary.log",
    threads: 1
    resources:
        **stage_resources("piaa", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/piaa.yaml"
    shell:
        "paperflow piaa summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
