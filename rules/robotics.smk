# robotics: simulator -> Bridge V2 raw tree -> multi-view dataset -> MVP-LAM / single-view LAM -> action-centricity
# (spec specs/robotics.md sections a-c). sim -> extract -> action_check + lam_train -> lam_eval -> mvplam_report
from paperflow.robotics import plan as robotics_plan

ROB_DATA = f"{config['data_dir']}/robotics"
ROB_RES = f"{RESULTS}/robotics/mvplam"
ROB_MODELS = f"{config['models_dir']}/robotics/mvplam"

if "robotics" in ENABLED:
    _rcfg = config["robotics"]
    STUDY_TARGETS["robotics"] = [f"{ROB_RES}/metrics.json", f"{ROB_RES}/summary.md", f"{ROB_RES}/frames.png",
                                 f"{ROB_RES}/action_info.png"]
    STUDY_SUMMARIES["robotics"] = f"{ROB_RES}/summary.md"


wildcard_constraints:
    rmodel=r"mvp|single|single0",
    rseed=r"\d+",


rule robotics_sim:
    output:
        raw=directory(f"{ROB_DATA}/sim/raw"),
        truth=directory(f"{ROB_DATA}/sim/truth"),
    params:
        p=lambda w: as_json(robotics_plan.sim_params(config["robotics"])),
    log:
        "logs/robotics/sim.log",
    benchmark:
        "benchmarks/robotics/sim.tsv"
    threads: 1
    resources:
        **stage_resources("robotics", "sim", mem_mb=2000, runtime=20),
    conda:
        "../envs/robotics.yaml"
    shell:
        "paperflow robotics sim --params {params.p:q} --out {output.raw} --truth {output.truth} > {log} 2>&1"


rule robotics_extract:
    input:
        lambda w: config["robotics"]["extract"]["raw_root"] or f"{ROB_DATA}/sim/raw",
    output:
        directory(f"{ROB_DATA}/mv"),
    params:
        p=lambda w: as_json(robotics_plan.extract_params(config["robotics"])),
    log:
        "logs/robotics/extract.log",
    benchmark:
        "benchmarks/robotics/extract.tsv"
    threads: 1
    resources:
        **stage_resources("robotics", "extract", mem_mb=4000, runtime=30),
    conda:
        "../envs/robotics.yaml"
    shell:
        "paperflow robotics extract --params {params.p:q} --raw {input} --out {output} > {log} 2>&1"


rule robotics_action_check:
    input:
        f"{ROB_DATA}/mv",
    output:
        f"{ROB_RES}/action_visibility.json",
    params:
        p=lambda w: as_json(robotics_plan.check_params(config["robotics"])),
    log:
        "logs/robotics/action_check.log",
    benchmark:
        "benchmarks/robotics/action_check.tsv"
    threads: 1
    resources:
        **stage_resources("robotics", "action_check", mem_mb=3000, runtime=20),
    conda:
        "../envs/robotics.yaml"
    shell:
        "paperflow robotics action-check --params {params.p:q} --data {input} --out {output} > {log} 2>&1"


rule robotics_lam_train:
    input:
        f"{ROB_DATA}/mv",
    output:
        directory(f"{ROB_MODELS}/{{rmodel}}/seed{{rseed}}"),
    params:
        p=lambda w: as_json(robotics_plan.train_params(config["robotics"], w.rmodel)),
    log:
        "logs/robotics/lam_train/{rmodel}-seed{rseed}.log",
    benchmark:
        "benchmarks/robotics/lam_train/{rmodel}-seed{rseed}.tsv"
    threads: 1
    resources:
        **stage_resources("robotics", "lam_train", mem_mb=3000, runtime=60),
    conda:
        "../envs/robotics.yaml"
    shell:
        "python -m paperflow.core.accel launch --procs {resources.gpu} -- paperflow robotics lam-train "
        "--params {params.p:q} --data {input} --model {wildcards.rmodel} --seed {wildcards.rseed} --out {output} "
        "> {log} 2>&1"


rule robotics_lam_eval:
    input:
        data=f"{ROB_DATA}/mv",
        model=f"{ROB_MODELS}/{{rmodel}}/seed{{rseed}}",
    output:
        f"{ROB_RES}/{{rmodel}}/seed{{rseed}}/metrics.json",
    params:
        p=lambda w: as_json(robotics_plan.eval_params(config["robotics"])),
    log:
        "logs/robotics/lam_eval/{rmodel}-seed{rseed}.log",
    benchmark:
        "benchmarks/robotics/lam_eval/{rmodel}-seed{rseed}.tsv"
    threads: 1
    resources:
        **stage_resources("robotics", "lam_eval", mem_mb=3000, runtime=30),
    conda:
        "../envs/robotics.yaml"
    shell:
        "paperflow robotics lam-eval --params {params.p:q} --data {input.data} --model-dir {input.model} "
        "--seed {wildcards.rseed} --out {output} > {log} 2>&1"


rule robotics_mvplam_report:
    input:
        data=f"{ROB_DATA}/mv",
        visibility=f"{ROB_RES}/action_visibility.json",
        metrics=[
            f"{ROB_RES}/{m}/seed{s}/metrics.json"
            for m in robotics_plan.models(config["robotics"])
            for s in robotics_plan.seeds(config["robotics"])
        ],
    output:
        metrics=f"{ROB_RES}/metrics.json",
        summary=f"{ROB_RES}/summary.md",
        frames=report(f"{ROB_RES}/frames.png", category="robotics", subcategory="MVP-LAM",
                      caption="../workflow/report/robotics.rst"),
        bars=report(f"{ROB_RES}/action_info.png", category="robotics", subcategory="MVP-LAM",
                    caption="../workflow/report/robotics.rst"),
    params:
        p=lambda w: as_json(robotics_plan.report_params(config["robotics"])),
        outdir=lambda w, output: os.path.dirname(output.summary),
    log:
        "logs/robotics/mvplam_report.log",
    threads: 1
    resources:
        **stage_resources("robotics", "report", mem_mb=2000, runtime=10),
    conda:
        "../envs/robotics.yaml"
    shell:
        "paperflow robotics report --params {params.p:q} --data {input.data} --metrics {input.metrics} "
        "--visibility {input.visibility} --outdir {params.outdir} > {log} 2>&1"
