# hashing: noisy-label injection + RFCMH robust cross-modal hashing (spec specs/hashing.md).
# synth (synthetic packs only) -> prep -> noise -> train -> quantize -> evaluate (+ chance) -> report
# Stage functions: src/paperflow/hashing/stages.py; methods: src/paperflow/hashing/methods/ (the registry).
import os

from paperflow.hashing import plan as hashing_plan
from paperflow.hashing.methods import METHODS as HASHING_METHODS

HASH_DATA = f"{config['data_dir']}/hashing"
HASH_RES = f"{RESULTS}/hashing"
HASH_MODELS = f"{config['models_dir']}/hashing"

# The report stage's figures (src/paperflow/hashing/report.py): one mAP-vs-noise figure per dataset that has runs
# and per configured checkpoint-selection rule.
HASH_FIGURES = {
    (ds, sel): f"{HASH_RES}/map_vs_noise_{ds}_{sel}.png"
    for ds in sorted({r["dataset"] for r in hashing_plan.runs(config["hashing"])})
    for sel in config["hashing"]["train"]["selections"]
}

if "hashing" in ENABLED:
    STUDY_TARGETS["hashing"] = [f"{HASH_RES}/metrics.json", f"{HASH_RES}/summary.md"]
    STUDY_SUMMARIES["hashing"] = f"{HASH_RES}/summary.md"


wildcard_constraints:
    hds=r"[A-Za-z0-9_\-]+",
    hmethod="|".join(HASHING_METHODS.names()),
    hbits=r"\d+",
    hmode=r"sym|asym",
    hrate=r"[0-9.]+",
    hsplit=r"train|val",
    hseed=r"\d+",


rule hashing_synth:
    output:
        f"{HASH_DATA}/raw/{{hds}}.mat",
    params:
        p=lambda w: as_json(hashing_plan.synth_params(config["hashing"], w.hds)),
    log:
        "logs/hashing/synth/{hds}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "synth", mem_mb=1000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing synth --params {params.p:q} --out {output} > {log} 2>&1"


rule hashing_prep:
    input:
        lambda w: hashing_plan.pack_path(config["hashing"], config["data_dir"], w.hds),
    output:
        train=f"{HASH_DATA}/{{hds}}/train.npz",
        val=f"{HASH_DATA}/{{hds}}/val.npz",
        query=f"{HASH_DATA}/{{hds}}/query.npz",
        database=f"{HASH_DATA}/{{hds}}/database.npz",
        meta=f"{HASH_DATA}/{{hds}}/meta.json",
    params:
        p=lambda w: as_json(hashing_plan.prep_params(config["hashing"], w.hds)),
        outdir=lambda w, output: os.path.dirname(output.meta),
    log:
        "logs/hashing/prep/{hds}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "prep", mem_mb=4000, runtime=20),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing prep --params {params.p:q} --pack {input} --outdir {params.outdir} > {log} 2>&1"


rule hashing_noise:
    input:
        f"{HASH_DATA}/{{hds}}/{{hsplit}}.npz",
    output:
        rec=f"{HASH_RES}/noise/{{hds}}/{{hsplit}}-{{hmode}}-r{{hrate}}-s{{hseed}}.npz",
        side=f"{HASH_RES}/noise/{{hds}}/{{hsplit}}-{{hmode}}-r{{hrate}}-s{{hseed}}.json",
    params:
        p=lambda w: as_json(hashing_plan.noise_params(config["hashing"], w.hmode, w.hrate, w.hseed)),
    log:
        "logs/hashing/noise/{hds}/{hsplit}-{hmode}-r{hrate}-s{hseed}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "noise", mem_mb=1000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing noise --params {params.p:q} --split-file {input} --out {output.rec} "
        "--sidecar {output.side} > {log} 2>&1"


# Test splits (query/database) are deliberately not inputs of training.
rule hashing_train:
    input:
        train=f"{HASH_DATA}/{{hds}}/train.npz",
        val=f"{HASH_DATA}/{{hds}}/val.npz",
        noise_train=f"{HASH_RES}/noise/{{hds}}/train-{{hmode}}-r{{hrate}}-s{{hseed}}.npz",
        noise_val=lambda w: hashing_plan.val_record(config["hashing"], RESULTS, w.hds, w.hmode, w.hrate, w.hseed),
    output:
        weights=f"{HASH_MODELS}/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}/weights.npz",
        log_jsonl=f"{HASH_MODELS}/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}/log.jsonl",
    params:
        p=lambda w: as_json(hashing_plan.train_params(config["hashing"], w.hds, w.hmethod, w.hbits, w.hmode, w.hrate, w.hseed)),
        # resumable training state (core.checkpoint); not an output: it survives a killed job and is
        # removed by the stage once the weights are written
        ckpt=lambda w, output: os.path.join(os.path.dirname(output.weights), "ckpt"),
    log:
        "logs/hashing/train/{hds}/{hmethod}-L{hbits}-{hmode}{hrate}-s{hseed}.log",
    benchmark:
        "benchmarks/hashing/train/{hds}/{hmethod}-L{hbits}-{hmode}{hrate}-s{hseed}.tsv"
    threads: 1
    resources:
        **stage_resources("hashing", "train", mem_mb=2000, runtime=60),
    conda:
        "../envs/hashing.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow hashing train --params {params.p:q} --train {input.train} --val {input.val} "
        "--noise-train {input.noise_train} --noise-val {input.noise_val} --out {output.weights} "
        "--log-jsonl {output.log_jsonl} --ckpt-dir {params.ckpt} > {log} 2>&1"


rule hashing_quantize:
    input:
        weights=f"{HASH_MODELS}/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}/weights.npz",
        query=f"{HASH_DATA}/{{hds}}/query.npz",
        database=f"{HASH_DATA}/{{hds}}/database.npz",
    output:
        f"{HASH_RES}/codes/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}.npz",
    params:
        p=lambda w: as_json(hashing_plan.eval_params(config["hashing"], w.hbits)),
    log:
        "logs/hashing/quantize/{hds}/{hmethod}-L{hbits}-{hmode}{hrate}-s{hseed}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "quantize", mem_mb=2000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing quantize --params {params.p:q} --weights {input.weights} --query {input.query} "
        "--database {input.database} --out {output} > {log} 2>&1"


rule hashing_evaluate:
    input:
        codes=f"{HASH_RES}/codes/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}.npz",
        weights=f"{HASH_MODELS}/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}/weights.npz",
        query=f"{HASH_DATA}/{{hds}}/query.npz",
        database=f"{HASH_DATA}/{{hds}}/database.npz",
    output:
        f"{HASH_RES}/eval/{{hds}}/{{hmethod}}-L{{hbits}}-{{hmode}}{{hrate}}-s{{hseed}}.json",
    params:
        p=lambda w: as_json(hashing_plan.eval_params(config["hashing"], w.hbits)),
    log:
        "logs/hashing/evaluate/{hds}/{hmethod}-L{hbits}-{hmode}{hrate}-s{hseed}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "evaluate", mem_mb=2000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing evaluate --params {params.p:q} --codes {input.codes} "
        "--weights-manifest {input.weights}.manifest.json --query {input.query} --database {input.database} "
        "--out {output} > {log} 2>&1"


# Chance level of mAP@all: random codes on the same query/database at the same code length (measured);
# the report calls a verdict "not testable" when a model is within `claims.chance_margin` of it.
rule hashing_chance:
    input:
        query=f"{HASH_DATA}/{{hds}}/query.npz",
        database=f"{HASH_DATA}/{{hds}}/database.npz",
    output:
        f"{HASH_RES}/chance/{{hds}}-L{{hbits}}.json",
    params:
        p=lambda w: as_json(hashing_plan.chance_params(config["hashing"], w.hbits)),
    log:
        "logs/hashing/chance/{hds}-L{hbits}.log",
    threads: 1
    resources:
        **stage_resources("hashing", "chance", mem_mb=2000, runtime=20),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing chance --params {params.p:q} --query {input.query} --database {input.database} "
        "--out {output} > {log} 2>&1"


rule hashing_report:
    input:
        evals=lambda w: hashing_plan.eval_paths(config["hashing"], RESULTS),
        sidecars=lambda w: hashing_plan.sidecar_paths(config["hashing"], RESULTS),
        chance=lambda w: hashing_plan.chance_paths(config["hashing"], RESULTS),
    output:
        metrics=f"{HASH_RES}/metrics.json",
        summary=f"{HASH_RES}/summary.md",
        figs=[
            report(f, category="hashing", subcategory=f"selection: {sel}", caption="../workflow/report/hashing.rst")
            for (ds, sel), f in HASH_FIGURES.items()
        ],
    params:
        p=lambda w: as_json(hashing_plan.report_params(config["hashing"])),
        outdir=lambda w, output: os.path.dirname(output.metrics),
    log:
        "logs/hashing/report.log",
    threads: 1
    resources:
        **stage_resources("hashing", "report", mem_mb=1000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing report --params {params.p:q} --evals {input.evals} "
        "--noise-sidecars {input.sidecars} --chance {input.chance} --outdir {params.outdir} > {log} 2>&1"
