# results/summary.md: one table of every enabled study's claims, built from the study manifests.


rule summary_all:
    input:
        [STUDY_SUMMARIES[s] for s in ENABLED if s in STUDY_SUMMARIES],
    output:
        f"{RESULTS}/summary.md",
    log:
        "logs/summary_all.log",
    threads: 1
    resources:
        mem_mb=mem_mb(500),
        runtime=5,
    conda:
        "../envs/core.yaml"
    shell:
        "paperflow report summary --out {output} {input} > {log} 2>&1"
