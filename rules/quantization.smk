# TWLA W1.58A4 post-training quantization (src/paperflow/quantization; spec ../shared/specs/quantization.md).
# Shared LM artefacts (SmolLM2 checkpoint, stdlib corpus) come from rules/lm.smk.
from paperflow.quantization import plan as qplan
from paperflow.unlearning import paths as ul_paths

if "quantization" in ENABLED:
    _Q = config["quantization"]
    _QP = qplan.paths(config)
    _QMODEL = qplan.model_dir(config)
    _QCORPUS = qplan.corpus_dir(config)
    STUDY_TARGETS["quantization"] = [_QP["metrics"], _QP["figure"], _QP["summary"]]
    STUDY_SUMMARIES["quantization"] = _QP["summary"]
    _URUN = ul_paths.run_name(config) if qplan.cross_enabled(config) else ""

    if _Q["model"]["source"] == "tiny":

        rule quantization_tiny_lm:
            input:
                corpus=_QCORPUS,
            output:
                directory(_QMODEL),
            params:
                p=as_json(qplan.tiny_params(_Q)),
            log:
                "logs/quantization/tiny_lm.log",
            benchmark:
                "benchmarks/quantization/tiny_lm.tsv"
            threads: 1
            resources:
                **stage_resources("quantization", "tiny_lm", mem_mb=2000, runtime=60),
            conda:
                "../envs/quantization.yaml"
            shell:
                "paperflow quantization tiny-lm --params {params.p:q} --corpus {input.corpus} --out {output} > {log} 2>&1"

    rule quantization_data:
        input:
            corpus=_QCORPUS,
            model=_QMODEL,
        output:
            _QP["tokens"],
        params:
            p=as_json(qplan.data_params(_Q)),
        log:
            "logs/quantization/data.log",
        threads: 1
        resources:
            **stage_resources("quantization", "data", mem_mb=2000, runtime=10),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization data --params {params.p:q} --corpus {input.corpus} --model {input.model} "
            "--out {output} > {log} 2>&1"

    rule quantization_kotms:
        input:
            model=_QMODEL,
        output:
            rot=_QP["kotms"],
            log=_QP["kotms_log"],
        params:
            p=as_json(qplan.kotms_params(_Q)),
        log:
            "logs/quantization/kotms.log",
        priority: qplan.job_priority(_Q, "kotms")
        benchmark:
            "benchmarks/quantization/kotms.tsv"
        threads: 1
        resources:
            **stage_resources("quantization", "kotms", mem_mb=3000, runtime=120),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization kotms --params {params.p:q} --model {input.model} --out {output.rot} "
            "--log {output.log} > {log} 2>&1"

    rule quantization_sens:
        input:
            model=_QMODEL,
            tokens=_QP["tokens"],
            kotms=_QP["kotms"],
        output:
            _QP["sens"],
        params:
            p=as_json(qplan.sens_params(_Q)),
        log:
            "logs/quantization/sens.log",
        priority: qplan.job_priority(_Q, "sens")
        benchmark:
            "benchmarks/quantization/sens.tsv"
        threads: 1
        resources:
            **stage_resources("quantization", "sens", mem_mb=3000, runtime=120),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization sens --params {params.p:q} --model {input.model} --tokens {input.tokens} "
            "--kotms {input.kotms} --out {output} > {log} 2>&1"

    rule quantization_weights:
        input:
            unpack(lambda w: qplan.weights_inputs(config, w.method)),
        output:
            directory(_QP["qdir"]),
        params:
            p=lambda w: as_json(qplan.weights_params(_Q, w.method, int(w.seed))),
            kotms=qplan.opt_flag("kotms", "kotms"),
        log:
            "logs/quantization/weights/s{seed}_{method}.log",
        priority: lambda w: qplan.job_priority(_Q, "weights", w.method)
        benchmark:
            "benchmarks/quantization/weights/s{seed}_{method}.tsv"
        threads: 1
        resources:
            **stage_resources("quantization", "weights", mem_mb=4000, runtime=120),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization weights --params {params.p:q} --model {input.model} --tokens {input.tokens} "
            "{params.kotms} --out {output} > {log} 2>&1"

    rule quantization_lac:
        input:
            unpack(lambda w: qplan.lac_inputs(config, w.method, w.seed)),
        output:
            _QP["lac"],
        params:
            p=lambda w: as_json(qplan.lac_params(_Q, int(w.seed))),
            qdir=qplan.opt_flag("qdir", "qdir"),
        log:
            "logs/quantization/lac/s{seed}_{method}.log",
        priority: lambda w: qplan.job_priority(_Q, "lac", w.method)
        threads: 1
        resources:
            **stage_resources("quantization", "lac", mem_mb=3000, runtime=60),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization lac --params {params.p:q} --model {input.model} {params.qdir} "
            "--tokens {input.tokens} --out {output} > {log} 2>&1"

    # one job per (method, group of activation settings with the same inputs); plan.eval_groups. Rules are
    # made in a loop (one per group) because a rule's output list cannot depend on a wildcard.
    for (_qm, _qg), _qacts in qplan.eval_groups(_Q).items():

        rule:
            name:
                f"quantization_eval_{_qm}_{_qg}"
            input:
                unpack(lambda w, m=_qm, g=_qg: qplan.eval_group_inputs(config, m, g, w.seed)),
            output:
                qplan.eval_group_outputs(config, _qm, _qg),
            params:
                p=lambda w, m=_qm, g=_qg: as_json(qplan.eval_group_params(_Q, m, g, int(w.seed))),
                qdir=qplan.opt_flag("qdir", "qdir"),
                lac=qplan.opt_flag("lac", "lac"),
                sens=qplan.opt_flag("sens", "sens"),
            log:
                f"logs/quantization/eval/s{{seed}}_{_qm}_{_qg}.log",
            priority: qplan.job_priority(_Q, "eval", _qm, _qg)
            benchmark:
                f"benchmarks/quantization/eval/s{{seed}}_{_qm}_{_qg}.tsv"
            threads: 1
            resources:
                **stage_resources("quantization", "eval", mem_mb=3000, runtime=60),
            conda:
                "../envs/quantization.yaml"
            shell:
                "paperflow quantization eval-group --params {params.p:q} --model {input.model} {params.qdir} "
                "--tokens {input.tokens} {params.lac} {params.sens} --out {output} > {log} 2>&1"

    rule quantization_report:
        input:
            **qplan.report_inputs(config),
        output:
            metrics=_QP["metrics"],
            figure=report(_QP["figure"], category="quantization", subcategory="perplexity",
                          caption="../workflow/report/quantization.rst"),
            summary=_QP["summary"],
        params:
            p=as_json(qplan.report_params(_Q)),
            res=lambda w, output: str(Path(output.metrics).parent),
            sens=lambda w, input: f"--sens {input.sens}" if input.sens else "",
            klog=lambda w, input: f"--kotms-log {input.kotms_log}" if input.kotms_log else "",
            cross=lambda w, input: f"--cross {input.cross}" if input.cross else "",
        log:
            "logs/quantization/report.log",
        threads: 1
        resources:
            **stage_resources("quantization", "report", mem_mb=1000, runtime=10),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization report --params {params.p:q} --results {params.res} --evals {input.evals} "
            "{params.sens} {params.klog} {params.cross} > {log} 2>&1"

    # ---------------------------------------------------------------- cross-study: unlearning checkpoints
    # Reads only the unlearning study's output files, located through paperflow.unlearning.paths, and
    # runs its public CLI stage `paperflow unlearning evaluate` (from the ul-eval stage).
    if qplan.cross_enabled(config):
        _XR = qplan.ul_report_inputs(config)
        STUDY_TARGETS["quantization"] += [_QP["ul_json"], _QP["ul_figure"]]

        # one job per (unlearning seed, model): quantize with every scheme, then sample + judge them all
        rule quantization_ul_eval:
            input:
                unpack(lambda w: qplan.ul_eval_inputs(config, w.umodel, w.useed)),
            output:
                qdirs=[directory(x) for x in qplan.ul_eval_outputs(config, "qdir")],
                evals=qplan.ul_eval_outputs(config, "eval"),
            wildcard_constraints:
                useed=r"\d+",
                umodel="|".join(_Q["cross_unlearning"]["models"]),
            params:
                p=lambda w: as_json(qplan.ul_eval_params(_Q, w.umodel, int(w.useed))),
                tok=qplan.opt_flag("tokenizer", "tokenizer"),
            log:
                "logs/quantization/ul_eval/seed{useed}_{umodel}.log",
            benchmark:
                "benchmarks/quantization/ul_eval/seed{useed}_{umodel}.tsv"
            threads: 1
            resources:
                **stage_resources("quantization", "ul_eval", mem_mb=3000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow quantization ul-eval --params {params.p:q} --model {input.model} --original {input.original} "
                "--data {input.data} --ref-samples {input.ref_samples} --ref-metrics {input.ref_metrics} {params.tok} "
                "--qdirs {output.qdirs} --out {output.evals} > {log} 2>&1"

        rule quantization_ul_report:
            input:
                **_XR,
            output:
                json=_QP["ul_json"],
                png=report(_QP["ul_figure"], category="quantization", subcategory="unlearning checkpoints: leak@k",
                           caption="../workflow/report/quantization.rst"),
            params:
                p=as_json(qplan.ul_report_params(_Q)),
            log:
                "logs/quantization/ul_report.log",
            threads: 1
            resources:
                **stage_resources("quantization", "ul_report", mem_mb=1000, runtime=10),
            conda:
                "../envs/quantization.yaml"
            shell:
                "paperflow quantization ul-report --params {params.p:q} --before {input.before} "
                "--after {input.after} --qdirs {input.qdirs} --out {output.json} --figure {output.png} > {log} 2>&1"
