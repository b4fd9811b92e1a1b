# hashing: noisy-label injection + RFCMH robust cross-modal hashing (spec specs/hashing.md).
# synth (synthetic packs only) -> prep -> noise (one job per dataset) -> train (one job per noise setting:
# its seeds, or per run with `jobs.group_seeds: false`) -> score (codes + mAP@all + chance level, one job per
# dataset x code length) -> report
# Stage functions: src/paperflow/hashing/stages.py; methods: src/paperflow/hashing/methods/ (the registry).
import os

from paperflow.hashing import plan as hashing_plan
from paperflow.hashing.methods import METHODS as HASHING_METHODS

HASH_DATA = f"{config['data_dir']}/hashing"
HASH_RES = f"{RESULTS}/hashing"
HASH_MODELS = f"{config['models_dir']}/hashing"
# a training job trains every seed of its noise setting (its outputs list them) or one seed (a wildcard)
HASH_GROUP = config["hashing"]["jobs"]["group_seeds"]
HASH_SEEDS = [str(s) for s in config["hashing"]["noise"]["seeds"]] if HASH_GROUP else ["{hseed}"]
HASH_SEED_TAG = hashing_plan.seed_tag(HASH_SEEDS) if HASH_GROUP else "{hseed}"
HASH_RUN = "{hmethod}-L{hbits}-{hmode}{hrate}"

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
        expand(f"{HASH_DATA}/{{{{hds}}}}/{{split}}.npz", split=["train", "val"]),
    output:
        rec=[f"{HASH_RES}/noise/{{hds}}/{n}.npz" for n in hashing_plan.noise_names(config["hashing"])],
        side=[f"{HASH_RES}/noise/{{hds}}/{n}.json" for n in hashing_plan.noise_names(config["hashing"])],
    params:
        p=lambda w: as_json(hashing_plan.noise_params(config["hashing"], w.hds)),
        split_dir=lambda w, input: os.path.dirname(input[0]),
        outdir=lambda w, output: os.path.dirname(output.rec[0]),
    log:
        "logs/hashing/noise/{hds}.log",
    benchmark:
        "benchmarks/hashing/noise/{hds}.tsv"
    threads: 1
    resources:
        **stage_resources("hashing", "noise", mem_mb=1000, runtime=10),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing noise --params {params.p:q} --split-dir {params.split_dir} --outdir {params.outdir} "
        "> {log} 2>&1"


# Test splits (query/database) are deliberately not inputs of training.
rule hashing_train:
    input:
        train=f"{HASH_DATA}/{{hds}}/train.npz",
        val=f"{HASH_DATA}/{{hds}}/val.npz",
        noise_train=lambda w: hashing_plan.train_record_paths(config["hashing"], RESULTS, w.hds, w.hmode, w.hrate, w.get("hseed"), "train"),
        noise_val=lambda w: hashing_plan.train_record_paths(config["hashing"], RESULTS, w.hds, w.hmode, w.hrate, w.get("hseed"), "val"),
    output:
        weights=[f"{HASH_MODELS}/{{hds}}/{HASH_RUN}-s{s}/weights.npz" for s in HASH_SEEDS],
        log_jsonl=[f"{HASH_MODELS}/{{hds}}/{HASH_RUN}-s{s}/log.jsonl" for s in HASH_SEEDS],
    params:
        p=lambda w: as_json(hashing_plan.train_job_params(config["hashing"], w.hds, w.hmethod, w.hbits, w.hmode, w.hrate, w.get("hseed"))),
        # resumable training state per run (core.checkpoint); not an output: it survives a killed job and is
        # removed by the stage once the job's weights are written
        ckpt=lambda w, output: [os.path.join(os.path.dirname(f), "ckpt") for f in output.weights],
    log:
        f"logs/hashing/train/{{hds}}/{HASH_RUN}-s{HASH_SEED_TAG}.log",
    benchmark:
        f"benchmarks/hashing/train/{{hds}}/{HASH_RUN}-s{HASH_SEED_TAG}.tsv"
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


# Codes, mAP@all of every run of one dataset and code length, and the chance level of mAP@all: random codes
# on the same query/database at the same code length (measured); the report calls a verdict "not testable"
# when a model is within `claims.chance_margin` of it. The only rule that reads the test splits.
rule hashing_score:
    input:
        weights=lambda w: hashing_plan.weights_paths(config["hashing"], HASH_MODELS, w.hds, w.hbits),
        query=f"{HASH_DATA}/{{hds}}/query.npz",
        database=f"{HASH_DATA}/{{hds}}/database.npz",
    output:
        evals=f"{HASH_RES}/eval/{{hds}}/L{{hbits}}.json",
        codes=f"{HASH_RES}/codes/{{hds}}/L{{hbits}}.npz",
        chance=f"{HASH_RES}/chance/{{hds}}-L{{hbits}}.json",
    params:
        p=lambda w: as_json(hashing_plan.eval_params(config["hashing"], w.hds, w.hbits)),
    log:
        "logs/hashing/score/{hds}-L{hbits}.log",
    benchmark:
        "benchmarks/hashing/score/{hds}-L{hbits}.tsv"
    threads: 1
    resources:
        **stage_resources("hashing", "score", mem_mb=2000, runtime=20),
    conda:
        "../envs/hashing.yaml"
    shell:
        "paperflow hashing score --params {params.p:q} --weights {input.weights} --query {input.query} "
        "--database {input.database} --out {output.evals} --codes {output.codes} --chance {output.chance} > {log} 2>&1"


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
