# video_bci: Video-BCI (spec vision_language_b §7; a reconstruction from the abstract).
# data (frame-vector videos, questions with decisive frames, fixed prior hypotheses) -> arms (seed x group of
# arms: GRPO with grpo_lite or TRL, evaluate on test) -> aggregate -> figures, summary.
# Stage functions: src/paperflow/video_bci/stages.py; parameters: config["video_bci"].
from paperflow.video_bci import plan as video_bci_plan

VIDEO_BCI_DATA = f"{config['data_dir']}/video_bci/items"
VIDEO_BCI_RES = f"{RESULTS}/video_bci"

if "video_bci" in ENABLED:
    STUDY_TARGETS["video_bci"] = [f"{VIDEO_BCI_RES}/summary.md", f"{VIDEO_BCI_RES}/figures/minority_recovery_by_arm.png"]
    STUDY_SUMMARIES["video_bci"] = f"{VIDEO_BCI_RES}/summary.md"


rule video_bci_data:
    output:
        directory(VIDEO_BCI_DATA),
    params:
        p=lambda w: as_json(video_bci_plan.data_params(config["video_bci"])),
    log:
        "logs/video_bci/data.log",
    benchmark:
        "benchmarks/video_bci/data.tsv"
    threads: 1
    resources:
        **stage_resources("video_bci", "data", mem_mb=1000, runtime=10),
    conda:
        "../envs/video_bci.yaml"
    shell:
        "paperflow video_bci data --params {params.p:q} --out {output} > {log} 2>&1"


rule video_bci_arms:
    input:
        data=VIDEO_BCI_DATA,
    output:
        f"{VIDEO_BCI_RES}/arms/s{{seed}}/c{{chunk}}.json",
    params:
        p=lambda w: as_json(video_bci_plan.arms_params(config["video_bci"], int(w.seed), int(w.chunk))),
        # resumable state (core.checkpoint): finished arms + the current arm; removed once the output is written
        ckpt=lambda w: f"{config['models_dir']}/video_bci/ckpt/s{w.seed}_c{w.chunk}",
    log:
        "logs/video_bci/arms/s{seed}_c{chunk}.log",
    benchmark:
        "benchmarks/video_bci/arms/s{seed}_c{chunk}.tsv"
    threads: 1
    resources:
        **stage_resources("video_bci", "arms", mem_mb=2000, runtime=30),
    conda:
        "../envs/video_bci.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- "
        "paperflow video_bci arms --params {params.p:q} --data {input.data} --out {output} --ckpt {params.ckpt} "
        "> {log} 2>&1"


rule video_bci_aggregate:
    input:
        jobs=lambda w: [f"{VIDEO_BCI_RES}/arms/s{s}/c{c}.json" for s, c in video_bci_plan.arm_jobs(config["video_bci"])],
        data=VIDEO_BCI_DATA,
    output:
        f"{VIDEO_BCI_RES}/metrics.json",
    log:
        "logs/video_bci/aggregate.log",
    threads: 1
    resources:
        **stage_resources("video_bci", "aggregate", mem_mb=1000, runtime=10),
    conda:
        "../envs/video_bci.yaml"
    shell:
        "paperflow video_bci aggregate --data {input.data} --out {output} {input.jobs} > {log} 2>&1"


rule video_bci_figures:
    input:
        f"{VIDEO_BCI_RES}/metrics.json",
    output:
        report(
            f"{VIDEO_BCI_RES}/figures/minority_recovery_by_arm.png",
            category="video_bci",
            caption="../workflow/report/video_bci.rst",
        ),
    params:
        p=lambda w: as_json(config["video_bci"]),
    log:
        "logs/video_bci/figures.log",
    threads: 1
    resources:
        **stage_resources("video_bci", "figures", mem_mb=1000, runtime=10),
    conda:
        "../envs/video_bci.yaml"
    shell:
        "paperflow video_bci figures --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"


rule video_bci_summary:
    input:
        f"{VIDEO_BCI_RES}/metrics.json",
    output:
        f"{VIDEO_BCI_RES}/summary.md",
    params:
        p=lambda w: as_json(config["video_bci"]),
    log:
        "logs/video_bci/summary.log",
    threads: 1
    resources:
        **stage_resources("video_bci", "summary", mem_mb=1000, runtime=10),
    conda:
        "../envs/video_bci.yaml"
    shell:
        "paperflow video_bci summary --params {params.p:q} --metrics {input} --out {output} > {log} 2>&1"
