# fmri: flat-map projection, synthetic BOLD, CortexMAE pretraining, Brainmarks probes (spec: specs/fmri.md).
# Each rule is one `paperflow fmri <stage>` call (src/paperflow/fmri/stages.py); parameters from plan.py.
# `priority:` (plan.job_priority) starts the longest chain first (pretraining cohort, volume/flat/parcel runs); scheduling only.
from paperflow.fmri import plan as fmri_plan

if "fmri" in ENABLED:
    _FC = config["fmri"]
    FMRI_RES = f"{RESULTS}/fmri/{_FC['tier']}"
    FMRI_DATA = f"{config['data_dir']}/fmri/{_FC['tier']}"
    FMRI_MODELS = f"{config['models_dir']}/fmri/{_FC['tier']}"
    FMRI_SCALING = fmri_plan.scaling_tags(_FC)
    FMRI_MAIN = [f"{sp}-s{s}" for sp in _FC["train"]["spaces"] for s in _FC["train"]["seeds"]]
    STUDY_TARGETS["fmri"] = [f"{FMRI_RES}/eval/metrics.json", f"{RESULTS}/fmri/summary.md"] + (
        [f"{FMRI_RES}/scaling"] if len(FMRI_SCALING) >= 3 else []
    )
    STUDY_SUMMARIES["fmri"] = f"{RESULTS}/fmri/summary.md"
    # The report stage's figures (src/paperflow/fmri/report.py): reconstruction.png only when a flat-space MAE
    # is pretrained (a "flat" entry in FMRI_MAIN).
    FMRI_FIGURES = [f"{FMRI_RES}/figures/{f}" for f in ("flatmap_patterns.png", "probes.png")] + (
        [f"{FMRI_RES}/figures/reconstruction.png"] if any(t.startswith("flat-") for t in FMRI_MAIN) else []
    )

    wildcard_constraints:
        fmri_cohort="pretrain|state|trait",
        fmri_tag=r"[a-z]+-[a-z0-9-]+",

    rule fmri_geometry:
        output:
            directory(f"{FMRI_RES}/geometry"),
        params:
            p=lambda w: as_json(fmri_plan.geometry_params(config["fmri"])),
        log:
            "logs/fmri/geometry.log",
        benchmark:
            "benchmarks/fmri/geometry.tsv"
        threads: 1
        resources:
            **stage_resources("fmri", "geometry", mem_mb=3000, runtime=15),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri geometry --params {params.p:q} --out {output} > {log} 2>&1"

    rule fmri_synth:
        input:
            geometry=f"{FMRI_RES}/geometry",
        output:
            (
                directory(f"{FMRI_DATA}/synth/{{fmri_cohort}}")
                if _FC["synth"]["keep_nifti"]
                else temp(directory(f"{FMRI_DATA}/synth/{{fmri_cohort}}"))
            ),
        params:
            p=lambda w: as_json(fmri_plan.synth_params(config["fmri"], w.fmri_cohort)),
        log:
            "logs/fmri/synth/{fmri_cohort}.log",
        benchmark:
            "benchmarks/fmri/synth/{fmri_cohort}.tsv"
        priority: lambda w: fmri_plan.job_priority(config["fmri"], "synth", cohort=w.fmri_cohort)
        threads: 1
        resources:
            **stage_resources("fmri", "synth", mem_mb=3000, runtime=60),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri synth --params {params.p:q} --geometry {input.geometry} "
            "--out {output} > {log} 2>&1"

    rule fmri_prep:
        input:
            synth=f"{FMRI_DATA}/synth/{{fmri_cohort}}",
            geometry=f"{FMRI_RES}/geometry",
        output:
            directory(f"{FMRI_DATA}/prep/{{fmri_cohort}}"),
        params:
            p=lambda w: as_json(fmri_plan.prep_params(config["fmri"], w.fmri_cohort)),
        log:
            "logs/fmri/prep/{fmri_cohort}.log",
        benchmark:
            "benchmarks/fmri/prep/{fmri_cohort}.tsv"
        priority: lambda w: fmri_plan.job_priority(config["fmri"], "prep", cohort=w.fmri_cohort)
        threads: 1
        resources:
            **stage_resources("fmri", "prep", mem_mb=4000, runtime=60),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri prep --params {params.p:q} --synth {input.synth} "
            "--geometry {input.geometry} --out {output} > {log} 2>&1"

    rule fmri_pretrain:
        input:
            geometry=f"{FMRI_RES}/geometry",
            data=f"{FMRI_DATA}/prep/pretrain",
        output:
            result=f"{FMRI_MODELS}/train/{{fmri_tag}}/result.json",
            best=f"{FMRI_MODELS}/train/{{fmri_tag}}/best.safetensors",
        params:
            p=lambda w: as_json(fmri_plan.train_params(config["fmri"], w.fmri_tag)),
            run_dir=lambda w: f"{FMRI_MODELS}/train/{w.fmri_tag}",
        log:
            "logs/fmri/pretrain/{fmri_tag}.log",
        benchmark:
            "benchmarks/fmri/pretrain/{fmri_tag}.tsv"
        priority: lambda w: fmri_plan.job_priority(config["fmri"], "pretrain", tag=w.fmri_tag)
        threads: 1
        resources:
            **stage_resources("fmri", "pretrain", mem_mb=3000, runtime=120),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri pretrain --params {params.p:q} --geometry {input.geometry} "
            "--data {input.data} --out {params.run_dir} > {log} 2>&1"

    rule fmri_embed:
        input:
            geometry=f"{FMRI_RES}/geometry",
            state=f"{FMRI_DATA}/prep/state",
            trait=f"{FMRI_DATA}/prep/trait",
            ckpt=lambda w: [] if w.fmri_tag.endswith("-rand") else [f"{FMRI_MODELS}/train/{w.fmri_tag}/best.safetensors"],
        output:
            f"{FMRI_RES}/embed/{{fmri_tag}}.npz",
        params:
            p=lambda w: as_json(fmri_plan.embed_params(config["fmri"], w.fmri_tag)),
            ckpt=lambda w, input: f"--ckpt {input.ckpt}" if input.ckpt else "",
        log:
            "logs/fmri/embed/{fmri_tag}.log",
        priority: lambda w: fmri_plan.job_priority(config["fmri"], "embed", tag=w.fmri_tag)
        threads: 1
        resources:
            **stage_resources("fmri", "embed", mem_mb=3000, runtime=30),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri embed --params {params.p:q} --geometry {input.geometry} "
            "{params.ckpt} --state {input.state} --trait {input.trait} --out {output} > {log} 2>&1"

    # the probe table in parts (issue 24): the baselines run beside pretraining, each feature part right
    # after its embedding; fmri_evaluate only merges them (metrics.json as one process would write it)
    rule fmri_probe:
        input:
            state=f"{FMRI_DATA}/prep/state",
            trait=f"{FMRI_DATA}/prep/trait",
            embed=lambda w: [] if w.fmri_part == fmri_plan.PROBE_BASELINES else [f"{FMRI_RES}/embed/{w.fmri_part}.npz"],
        output:
            f"{FMRI_RES}/eval/parts/{{fmri_part}}.json",
        wildcard_constraints:
            fmri_part="|".join(fmri_plan.probe_tags(_FC)),
        params:
            p=lambda w: as_json(fmri_plan.probe_params(config["fmri"], w.fmri_part)),
            embed=lambda w, input: f"--embed {input.embed}" if input.embed else "",
        log:
            "logs/fmri/probe/{fmri_part}.log",
        benchmark:
            "benchmarks/fmri/probe/{fmri_part}.tsv"
        priority: lambda w: fmri_plan.job_priority(config["fmri"], "probe", tag=w.fmri_part)
        threads: 1
        resources:
            **stage_resources("fmri", "probe", mem_mb=3000, runtime=60),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri probe --params {params.p:q} --state {input.state} --trait {input.trait} "
            "{params.embed} --out {output} > {log} 2>&1"

    rule fmri_evaluate:
        input:
            parts=[f"{FMRI_RES}/eval/parts/{t}.json" for t in fmri_plan.probe_tags(_FC)],
        output:
            f"{FMRI_RES}/eval/metrics.json",
        params:
            p=lambda w: as_json(fmri_plan.eval_params(config["fmri"])),
        log:
            "logs/fmri/evaluate.log",
        benchmark:
            "benchmarks/fmri/evaluate.tsv"
        threads: 1
        resources:
            **stage_resources("fmri", "evaluate", mem_mb=1000, runtime=10),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri evaluate --params {params.p:q} --parts {input.parts} --out {output} > {log} 2>&1"

    rule fmri_scaling:
        input:
            [f"{FMRI_MODELS}/train/{t}/result.json" for t in FMRI_SCALING],
        output:
            report(directory(f"{FMRI_RES}/scaling"), patterns=["{name}.png"], category="fmri",
                   subcategory="pretraining scaling", caption="../workflow/report/fmri.rst"),
        log:
            "logs/fmri/scaling.log",
        threads: 1
        resources:
            **stage_resources("fmri", "scaling", mem_mb=1000, runtime=10),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri scaling --runs {input} --out {output} > {log} 2>&1"

    rule fmri_report:
        input:
            geometry=f"{FMRI_RES}/geometry",
            metrics=f"{FMRI_RES}/eval/metrics.json",
            scaling=[f"{FMRI_RES}/scaling"] if len(FMRI_SCALING) >= 3 else [],
            pretrain=[f"{FMRI_MODELS}/train/{t}/result.json" for t in FMRI_MAIN],
            prep=[f"{FMRI_DATA}/prep/{c}" for c in fmri_plan.COHORTS],
        output:
            summary=f"{RESULTS}/fmri/summary.md",
            figs=report(FMRI_FIGURES, category="fmri", subcategory="flat maps, probes, reconstruction",
                        caption="../workflow/report/fmri.rst"),
        params:
            p=lambda w: as_json(fmri_plan.report_params(config["fmri"])),
            scaling=lambda w, input: f"--scaling {input.scaling}" if input.scaling else "",
            figdir=lambda w, output: os.path.dirname(output.figs[0]),
            state=lambda w, input: next(p for p in input.prep if Path(p).name == "state"),
        log:
            "logs/fmri/report.log",
        threads: 1
        resources:
            **stage_resources("fmri", "report", mem_mb=3000, runtime=15),
        conda:
            "../envs/fmri.yaml"
        shell:
            "paperflow fmri report --params {params.p:q} --geometry {input.geometry} --metrics {input.metrics} "
            "{params.scaling} --pretrain {input.pretrain} --prep {input.prep} --state {params.state} "
            "--summary {output.summary} --figdir {params.figdir} > {log} 2>&1"
