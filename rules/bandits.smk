# BLCE / BLCE-G bandits: simulate (a chunk of cells; cell = experiment × regime × algorithm × T × seed)
# → aggregate → figures → summary. Logic: src/paperflow/bandits; parameters: config["bandits"].
from paperflow.bandits import plan as bandits_plan

BANDITS = f"{RESULTS}/bandits"
BANDITS_FIGURES = ["regret_curves.png", "updates_vs_T.png", "runtime.png", "budget.png", "glm.png"]

if "bandits" in ENABLED:
    STUDY_TARGETS["bandits"] = [f"{BANDITS}/summary.md"] + [f"{BANDITS}/figures/{f}" for f in BANDITS_FIGURES]
    STUDY_SUMMARIES["bandits"] = f"{BANDITS}/summary.md"


if bandits_plan.per_cell(config.get("bandits", {})):

    rule bandits_simulate:  # rounds_per_job: 1 -- one job per cell
        output:
            f"{BANDITS}/runs/{{exp}}/{{regime}}/{{variant}}/T{{T}}_s{{seed}}.json",
        params:
            p=lambda w: as_json(
                bandits_plan.job_params(
                    config["bandits"], w.exp, w.regime, w.variant, int(w.T), int(w.seed)
                )
            ),
        log:
            "logs/bandits/simulate/{exp}/{regime}/{variant}/T{T}_s{seed}.log",
        benchmark:
            "benchmarks/bandits/simulate/{exp}/{regime}/{variant}/T{T}_s{seed}.tsv"
        wildcard_constraints:
            exp="main|glm|budget",
            T=r"\d+",
        threads: 1
        resources:
            **stage_resources("bandits", "simulate", mem_mb=1000, runtime=60),
        conda:
            "../envs/bandits.yaml"
        shell:
            "paperflow bandits simulate --params {params.p:q} --out {output} > {log} 2>&1"

else:

    rule bandits_simulate:  # one job per chunk of cells (plan.chunks, config bandits.rounds_per_job)
        output:
            f"{BANDITS}/runs/{{exp}}/{{regime}}/{{variant}}/chunk{{chunk}}.json",
        params:
            p=lambda w: as_json(
                bandits_plan.chunk_params(config["bandits"], w.exp, w.regime, w.variant, int(w.chunk))
            ),
        log:
            "logs/bandits/simulate/{exp}/{regime}/{variant}/chunk{chunk}.log",
        benchmark:
            "benchmarks/bandits/simulate/{exp}/{regime}/{variant}/chunk{chunk}.tsv"
        wildcard_constraints:
            exp="main|glm|budget",
            chunk=r"\d+",
        threads: 1
        resources:
            **stage_resources("bandits", "simulate", mem_mb=1000, runtime=60),
        conda:
            "../envs/bandits.yaml"
        shell:
            "paperflow bandits simulate-chunk --params {params.p:q} --out {output} > {log} 2>&1"


rule bandits_aggregate:
    input:
        lambda w: bandits_plan.outputs(config["bandits"], RESULTS),
    output:
        f"{BANDITS}/metrics.json",
    log:
        "logs/bandits/aggregate.log",
    threads: 1
    resources:
        **stage_resources("bandits", "aggregate", mem_mb=2000, runtime=10),
    conda:
        "../envs/bandits.yaml"
    shell:
        "paperflow bandits aggregate --out {output} {input} > {log} 2>&1"


rule bandits_figures:
    input:
        f"{BANDITS}/metrics.json",
    output:
        report(
            expand(f"{BANDITS}/figures/{{f}}", f=BANDITS_FIGURES),
            category="bandits",
            caption="../workflow/report/bandits.rst",
        ),
    params:
        outdir=lambda w, output: os.path.dirname(output[0]),
    log:
        "logs/bandits/figures.log",
    threads: 1
    resources:
        **stage_resources("bandits", "figures", mem_mb=2000, runtime=10),
    conda:
        "../envs/bandits.yaml"
    shell:
        "paperflow bandits figures --metrics {input} --outdir {params.outdir} > {log} 2>&1"


rule bandits_summary:
    input:
        f"{BANDITS}/metrics.json",
    output:
        f"{BANDITS}/summary.md",
    params:
        p=lambda w: as_json(config["bandits"]),
    log:
        "logs/bandits/summary.log",
    threads: 1
    resources:
        **stage_resources("bandits", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/bandits.yaml"
    shell:
        "paperflow bandits summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
