# fdiv: f-divergence surrogate losses (f-TB) for VI and GFlowNets. Logic: src/paperflow/fdiv.
# identity checks + one job per loss for the GMM fits (all models × seeds) and per loss for the hypergrid
# -> aggregate (metrics.json, curves.csv) -> figures -> summary.md
from paperflow.fdiv import plan as fdiv_plan

FDIV = config["fdiv"]
FDIV_OUT = f"{RESULTS}/fdiv"

if "fdiv" in ENABLED:
    STUDY_TARGETS["fdiv"] = [
        f"{FDIV_OUT}/metrics.json",
        *[f"{FDIV_OUT}/figures/{n}" for n in fdiv_plan.figures(FDIV)],
        f"{FDIV_OUT}/summary.md",
    ]
    STUDY_SUMMARIES["fdiv"] = f"{FDIV_OUT}/summary.md"


rule fdiv_identity:
    output:
        f"{FDIV_OUT}/unit/identity.json",
    params:
        p=lambda w: as_json(fdiv_plan.identity_params(FDIV)),
    log:
        "logs/fdiv/identity.log",
    benchmark:
        "benchmarks/fdiv/identity.tsv"
    threads: 1
    resources:
        **stage_resources("fdiv", "identity", mem_mb=1000, runtime=15),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv identity --params {params.p:q} --out {output} > {log} 2>&1"


# One job per loss: every (model, seed) GMM run of that loss, resp. every seed of its hypergrid run, in one
# process (seconds-long runs; each job pays the torch start-up once). Outputs: the per-run files.
FDIV_GMM_MS = [(m, s) for m in FDIV["gmm"]["models"] for s in fdiv_plan.seeds(FDIV)]


rule fdiv_gmm:
    output:
        json=[fdiv_plan.gmm_path(RESULTS, m, "{loss}", s) for m, s in FDIV_GMM_MS],
        density=[fdiv_plan.gmm_path(RESULTS, m, "{loss}", s, "npz") for m, s in FDIV_GMM_MS],
    params:
        p=lambda w: as_json(fdiv_plan.gmm_loss_params(FDIV, w.loss)),
        results=lambda w, output: str(Path(output.json[0]).parents[4]),  # <results>/fdiv/gmm/<model>/<loss>/
    log:
        "logs/fdiv/gmm/{loss}.log",
    benchmark:
        "benchmarks/fdiv/gmm/{loss}.tsv"
    threads: 1
    resources:
        **stage_resources("fdiv", "gmm", mem_mb=1000, runtime=30),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv gmm-loss --params {params.p:q} --results {params.results:q} > {log} 2>&1"


rule fdiv_hypergrid:
    output:
        [fdiv_plan.hypergrid_path(RESULTS, "{loss}", s) for s in fdiv_plan.seeds(FDIV)],
    params:
        p=lambda w: as_json(fdiv_plan.hypergrid_loss_params(FDIV, w.loss)),
        results=lambda w, output: str(Path(output[0]).parents[3]),  # <results>/fdiv/hypergrid/<loss>/
    log:
        "logs/fdiv/hypergrid/{loss}.log",
    benchmark:
        "benchmarks/fdiv/hypergrid/{loss}.tsv"
    threads: 1
    resources:
        **stage_resources("fdiv", "hypergrid", mem_mb=1000, runtime=30),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv hypergrid-loss --params {params.p:q} --results {params.results:q} > {log} 2>&1"


rule fdiv_aggregate:
    input:
        lambda w: fdiv_plan.run_files(RESULTS, FDIV),
    output:
        metrics=f"{FDIV_OUT}/metrics.json",
        curves=f"{FDIV_OUT}/curves.csv",
    params:
        p=lambda w: as_json(fdiv_plan.report_params(FDIV)),
        results=lambda w, output: str(Path(output.metrics).parents[1]),
    log:
        "logs/fdiv/aggregate.log",
    threads: 1
    resources:
        **stage_resources("fdiv", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv aggregate --params {params.p:q} --results {params.results} --out {output.metrics} "
        "--curves {output.curves} > {log} 2>&1"


rule fdiv_figures:
    input:
        f"{FDIV_OUT}/metrics.json",
        f"{FDIV_OUT}/curves.csv",
    output:
        figs=report(
            [f"{FDIV_OUT}/figures/{n}" for n in fdiv_plan.figures(FDIV)],
            category="fdiv",
            caption="../workflow/report/fdiv.rst",
        ),
    params:
        p=lambda w: as_json(fdiv_plan.report_params(FDIV)),
        results=lambda w, output: str(Path(output.figs[0]).parents[2]),
        outdir=lambda w, output: os.path.dirname(output.figs[0]),
    log:
        "logs/fdiv/figures.log",
    threads: 1
    resources:
        **stage_resources("fdiv", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv figures --params {params.p:q} --results {params.results} --outdir {params.outdir} > {log} 2>&1"


rule fdiv_summary:
    input:
        f"{FDIV_OUT}/metrics.json",
    output:
        f"{FDIV_OUT}/summary.md",
    params:
        p=lambda w: as_json(fdiv_plan.summary_params(FDIV)),
        results=lambda w, output: str(Path(output[0]).parents[1]),
    log:
        "logs/fdiv/summary.log",
    threads: 1
    resources:
        **stage_resources("fdiv", "summary", mem_mb=500, runtime=5),
    conda:
        "../envs/fdiv.yaml"
    shell:
        "paperflow fdiv summary --params {params.p:q} --results {params.results} --out {output} > {log} 2>&1"
