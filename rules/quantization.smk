# TWLA W1.58A4 post-training quantization (src/paperflow/quantization; spec ../shared/specs/quantization.md).
# Shared LM artefacts (SmolLM2 checkpoint, stdlib corpus) come from rules/lm.smk.
from paperflow.quantization import plan as qplan

if "quantization" in ENABLED:
    _Q = config["quantization"]
    _QP = qplan.paths(config)
    _QMODEL = qplan.model_dir(config)
    _QCORPUS = qplan.corpus_dir(config)
    STUDY_TARGETS["quantization"] = [_QP["metrics"], _QP["figure"], _QP["summary"]]
    STUDY_SUMMARIES["quantization"] = _QP["summary"]

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
            log=_QP["kotms"].replace(".safetensors", "_log.json"),
        params:
            p=as_json(qplan.kotms_params(_Q)),
        log:
            "logs/quantization/kotms.log",
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
            unpack(lambda w: {"model": _QMODEL, "tokens": _QP["tokens"],
                              **({"kotms": _QP["kotms"]} if qplan.needs_kotms(_Q, w.method) else {})}),
        output:
            directory(_QP["qdir"]),
        params:
            p=lambda w: as_json(qplan.weights_params(_Q, w.method, int(w.seed))),
            kotms=qplan.opt_flag("kotms", "kotms"),
        log:
            "logs/quantization/weights/s{seed}_{method}.log",
        benchmark:
            "benchmarks/quantization/weights/s{seed}_{method}.tsv"
        threads: 1
        resources:
            **stage_resources("quantization", "weights", mem_mb=4000, runtime=120),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization weights --params {params.p:q} --method {wildcards.method} --seed {wildcards.seed} "
            "--model {input.model} --tokens {input.tokens} {params.kotms} --out {output} > {log} 2>&1"

    rule quantization_lac:
        input:
            unpack(lambda w: {"model": _QMODEL, "tokens": _QP["tokens"],
                              **({"qdir": q[0]} if (q := qplan.qdir_inputs(config, w.method, w.seed)) else {})}),
        output:
            _QP["lac"],
        params:
            p=lambda w: as_json(qplan.lac_params(_Q, int(w.seed))),
            qdir=qplan.opt_flag("qdir", "qdir"),
        log:
            "logs/quantization/lac/s{seed}_{method}.log",
        threads: 1
        resources:
            **stage_resources("quantization", "lac", mem_mb=3000, runtime=60),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization lac --params {params.p:q} --method {wildcards.method} --seed {wildcards.seed} "
            "--model {input.model} {params.qdir} --tokens {input.tokens} --out {output} > {log} 2>&1"

    rule quantization_eval:
        input:
            unpack(lambda w: qplan.eval_inputs(config, w)),
        output:
            _QP["eval"],
        params:
            p=lambda w: as_json(qplan.eval_params(_Q, w.method, w.act)),
            qdir=qplan.opt_flag("qdir", "qdir"),
            lac=qplan.opt_flag("lac", "lac"),
            sens=qplan.opt_flag("sens", "sens"),
        log:
            "logs/quantization/eval/s{seed}_{method}_{act}.log",
        benchmark:
            "benchmarks/quantization/eval/s{seed}_{method}_{act}.tsv"
        threads: 1
        resources:
            **stage_resources("quantization", "eval", mem_mb=3000, runtime=60),
        conda:
            "../envs/quantization.yaml"
        shell:
            "paperflow quantization eval --params {params.p:q} --method {wildcards.method} --act {wildcards.act} "
            "--model {input.model} {params.qdir} --tokens {input.tokens} {params.lac} {params.sens} "
            "--out {output} > {log} 2>&1"

    rule quantization_report:
        input:
            evals=qplan.eval_targets(config),
            sens=[_QP["sens"]] if any(qplan.split_run(r)[1] in qplan.MP_ACTS for r in _Q["runs"]) else [],
            kotms_log=[_QP["kotms"].replace(".safetensors", "_log.json")]
            if any(qplan.needs_kotms(_Q, qplan.split_run(r)[0]) for r in _Q["runs"]) else [],
            cross=[f"{RESULTS}/quantization/unlearning_leak.json"]
            if _Q["cross_unlearning"]["enabled"] and "unlearning" in ENABLED else [],
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
    # Consumes only the unlearning study's documented outputs (src/paperflow/unlearning/README.md).
    if _Q["cross_unlearning"]["enabled"] and "unlearning" in ENABLED:
        from paperflow.unlearning import plan as _ulp

        _XU = _Q["cross_unlearning"]
        _UCFG = config["unlearning"]
        _URUN = _UCFG["run_name"]
        _U_DATA = f"{config['data_dir']}/unlearning/{_URUN}/tofu"
        _U_MODELS = f"{config['models_dir']}/unlearning/{_URUN}"
        _U_METRICS = f"{RESULTS}/unlearning/{_URUN}/metrics"
        _XQ = f"{config['models_dir']}/quantization/unlearning/{_URUN}/seed{{useed}}/{{umodel}}__{{scheme}}"
        _XE = f"{RESULTS}/quantization/unlearning/{_URUN}/seed{{useed}}/{{umodel}}__{{scheme}}/metrics.json"
        _XKEYS = [(s, m, sc) for s in _XU["seeds"] for m in _XU["models"] for sc in _XU["schemes"]]
        _XOUT = [f"{RESULTS}/quantization/unlearning_leak.json", f"{RESULTS}/quantization/unlearning_leak.png"]
        STUDY_TARGETS["quantization"] += _XOUT

        rule quantization_ul_quantize:
            input:
                model=lambda w: qplan.unlearning_model_dir(config, w.umodel, w.useed),
                original=lambda w: qplan.unlearning_model_dir(config, "full", w.useed),
            output:
                directory(_XQ),
            log:
                "logs/quantization/ul_quantize/seed{useed}_{umodel}__{scheme}.log",
            threads: 1
            resources:
                **stage_resources("quantization", "ul_quantize", mem_mb=2000, runtime=20),
            conda:
                "../envs/quantization.yaml"
            shell:
                "paperflow quantization ul-quantize --model {input.model} --original {input.original} "
                "--scheme {wildcards.scheme} --out {output} > {log} 2>&1"

        rule quantization_ul_eval:
            input:
                model=_XQ,
                data=_U_DATA,
                tok=lambda w: [f"{_U_MODELS}/tokenizer"] if _UCFG["model"]["kind"] == "tiny" else [],
            output:
                _XE,
            params:
                p=lambda w: as_json({"sample": _ulp.sample_params(_UCFG, f"{w.umodel}__{w.scheme}", int(w.useed)),
                                     "judge": _ulp.judge_params(_UCFG)}),
                tok=lambda w, input: f"--tokenizer {input.tok}" if input.tok else "",
                out=lambda w, output: str(Path(output[0]).parent),
            log:
                "logs/quantization/ul_eval/seed{useed}_{umodel}__{scheme}.log",
            threads: 1
            resources:
                **stage_resources("quantization", "ul_eval", mem_mb=3000, runtime=60),
            conda:
                "../envs/unlearning.yaml"
            shell:
                "paperflow unlearning evaluate --params {params.p:q} --data {input.data} --model {input.model} "
                "{params.tok} --seed {wildcards.useed} --out-dir {params.out} > {log} 2>&1"

        rule quantization_ul_report:
            input:
                before=[f"{_U_METRICS}/seed{s}/{m}.json" for s in _XU["seeds"] for m in _XU["models"]],
                after=[_XE.format(useed=s, umodel=m, scheme=sc) for s, m, sc in _XKEYS],
                qdirs=[_XQ.format(useed=s, umodel=m, scheme=sc) for s, m, sc in _XKEYS],
            output:
                json=_XOUT[0],
                png=report(_XOUT[1], category="quantization", subcategory="unlearning checkpoints: leak@k",
                           caption="../workflow/report/quantization.rst"),
            params:
                p=as_json({"decoder": _UCFG["eval"]["headline_decoder"], "judge": _UCFG["eval"]["headline_judge"]}),
                before=" ".join(f"{m}={_U_METRICS}/seed{s}/{m}.json" for s in _XU["seeds"][:1] for m in _XU["models"]),
                after=" ".join(f"{m}__{sc}={_XE.format(useed=s, umodel=m, scheme=sc)}" for s, m, sc in _XKEYS if s == _XU["seeds"][0]),
                qdirs=" ".join(f"{m}__{sc}={_XQ.format(useed=s, umodel=m, scheme=sc)}" for s, m, sc in _XKEYS if s == _XU["seeds"][0]),
            log:
                "logs/quantization/ul_report.log",
            threads: 1
            resources:
                **stage_resources("quantization", "ul_report", mem_mb=1000, runtime=10),
            conda:
                "../envs/quantization.yaml"
            shell:
                "paperflow quantization ul-report --params {params.p:q} --before {params.before} --after {params.after} "
                "--qdirs {params.qdirs} --out {output.json} --figure {output.png} > {log} 2>&1"
