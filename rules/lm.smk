# Shared LM artefacts (src/paperflow/lm). No targets of their own: built when a study asks for them.
# Paths are stable functions of the config (paperflow.lm.paths; documented in src/paperflow/lm/README.md).
# lm has no config section: cluster resources come from `quantization.resources.lm_<stage>` (the owning study).
from paperflow.lm.paths import smollm2_dir, stdlib_corpus_dir


rule lm_convert_smollm2:
    output:
        directory(smollm2_dir(config)),
    log:
        "logs/lm/convert_smollm2.log",
    benchmark:
        "benchmarks/lm/convert_smollm2.tsv"
    threads: 1
    resources:
        **stage_resources("quantization", "lm_convert_smollm2", mem_mb=3000, runtime=15),
    conda:
        "../envs/lm.yaml"
    shell:
        "paperflow lm convert-smollm2 --out {output} > {log} 2>&1"


rule lm_corpus_stdlib:
    output:
        directory(stdlib_corpus_dir(config)),
    log:
        "logs/lm/corpus_stdlib.log",
    threads: 1
    resources:
        **stage_resources("quantization", "lm_corpus_stdlib", mem_mb=1000, runtime=10),
    conda:
        "../envs/lm.yaml"
    shell:
        "paperflow lm corpus-stdlib --out {output} > {log} 2>&1"
