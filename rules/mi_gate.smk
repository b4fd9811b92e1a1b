# mi_gate: Multimodal Interaction Gate (spec vision_language_b.md §9; estimator/gate from the authors' code).
# data (synthetic data.json + image_features.npy) -> gate (captioner, cross-fitted LSMI scores, selections)
# -> train (one arm × τ, seeds grouped per job) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/mi_gate/stages.py; parameters: config["mi_gate"].
from paperflow.mi_gate import plan as mi_gate_plan

MI_GATE_DATA = f"{config['data_dir']}/mi_gate"
MI_GATE_RES = f"{RESULTS}/mi_gate"
MI_GATE_MODELS = f"{config['models_dir']}/mi_gate"
MI_GATE_IN = mi_gate_plan.inputs(config["mi_gate"], f"{MI_GATE_DATA}/synth")
MI_GATE_SYNTH = [f"{MI_GATE_DATA}/synth"] if config["mi_gate"]["data"]["source"] == "synthetic" else []

if "mi_gate" in ENABLED:
    STUDY_TARGETS["mi_gate"] = [f"{MI_GATE_RES}/summary.md", f"{MI_GATE_RES}/figures/vie_by_corruption.png"]
    STUDY_SUMMARIES["mi_gate"] = f"{MI_GATE_RES}/summary.md"


wildcard_constraints:
    mgvariant=r"original|(gated|random|words)_t[0-9.e-]+",
    mgseeds=r"all|s\d+",


rule mi_gate_data:
    output:
        directory(f"{MI_GATE_DATA}/synth"),
    params:
        p=lambda w: as_json(mi_gate_plan.data_params(config["mi_gate"])),
    log:
        "logs/mi_gate/data.log",
    benchmark:
        "benchmarks/mi_gate/data.tsv"
    threads: 1
    resources:
        **stage_resources("mi_gate", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate data --params {params.p:q} --out {output} > {log} 2>&1"


rule mi_gate_gate:
    input:
        synth=MI_GATE_SYNTH,
    output:
        gate=f"{MI_GATE_RES}/gate.json",
        captioner=f"{MI_GATE_MODELS}/captioner.safetensors",
    params:
        p=lambda w: as_json(mi_gate_plan.gate_params(config["mi_gate"])),
        data_json=MI_GATE_IN["data_json"],
        images=MI_GATE_IN["images"],
    log:
        "logs/mi_gate/gate.log",
    benchmark:
        "benchmarks/mi_gate/gate.tsv"
    threads: 1
    resources:
        **stage_resources("mi_gate", "gate", mem_mb=2000, runtime=20),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate gate --params {params.p:q} --data-json {params.data_json} --images {params.images} "
        "--out {output.gate} --captioner {output.captioner} > {log} 2>&1"


rule mi_gate_train:
    input:
        synth=MI_GATE_SYNTH,
        gate=f"{MI_GATE_RES}/gate.json",
        captioner=f"{MI_GATE_MODELS}/captioner.safetensors",
    output:
        f"{MI_GATE_RES}/runs/{{mgvariant}}/{{mgseeds}}.json",
    params:
        p=lambda w: as_json(mi_gate_plan.train_params(config["mi_gate"], w.mgvariant, w.mgseeds)),
        data_json=MI_GATE_IN["data_json"],
        images=MI_GATE_IN["images"],
    log:
        "logs/mi_gate/train/{mgvariant}_{mgseeds}.log",
    benchmark:
        "benchmarks/mi_gate/train/{mgvariant}_{mgseeds}.tsv"
    threads: 1
    resources:
        **stage_resources("mi_gate", "train", mem_mb=2000, runtime=30),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate train --params {params.p:q} --data-json {params.data_json} --images {params.images} "
        "--gate {input.gate} --captioner {input.captioner} --out {output} > {log} 2>&1"


rule mi_gate_aggregate:
    input:
        runs=lambda w: [f"{MI_GATE_RES}/runs/{v}/{s}.json" for v, s in mi_gate_plan.runs(config["mi_gate"])],
        gate=f"{MI_GATE_RES}/gate.json",
    output:
        f"{MI_GATE_RES}/metrics.json",
    log:
        "logs/mi_gate/aggregate.log",
    threads: 1
    resources:
        **stage_resources("mi_gate", "aggregate", mem_mb=2000, runtime=10),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate aggregate --gate {input.gate} --out {output} {input.runs} > {log} 2>&1"


rule mi_gate_figures:
    input:
        f"{MI_GATE_RES}/metrics.json",
    output:
        report(
            f"{MI_GATE_RES}/figures/vie_by_corruption.png",
            category="mi_gate",
            caption="../workflow/report/mi_gate.rst",
        ),
    params:
        tau=config["mi_gate"]["claims"]["tau"],
    log:
        "logs/mi_gate/figures.log",
    threads: 1
    resources:
        **stage_resources("mi_gate", "figures", mem_mb=2000, runtime=10),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate figures --metrics {input} --tau {params.tau} --out {output} > {log} 2>&1"


rule mi_gate_summary:
    input:
        f"{MI_GATE_RES}/metrics.json",
    output:
        f"{MI_GATE_RES}/summary.md",
    params:
        p=lambda w: as_json(config["mi_gate"]),
    log:
        "logs/mi_gate/summary.log",
    threads: 1
    resources:
        **stage_resources("mi_gate", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/mi_gate.yaml"
    shell:
        "paperflow mi_gate summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
