# paperflow — table of contents. Logic lives in src/paperflow; rules are thin CLI calls.
from snakemake.utils import min_version

min_version("9.19")


# The tiny default, unless the command line names its own config file(s): `--configfile config/test.yaml`
# then means exactly test.yaml (+ schema defaults), not test.yaml laid over config.yaml. To overlay,
# name both: `--configfile config/config.yaml my_changes.yaml`.
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"  # validates the config before any job runs
include: "rules/bandits.smk"
include: "rules/lm.smk"
include: "rules/robotics.smk"
include: "rules/hashing.smk"
include: "rules/quantization.smk"
include: "rules/fmri.smk"
include: "rules/fdiv.smk"
include: "rules/unlearning.smk"
include: "rules/robopolicy.smk"
include: "rules/docloc.smk"
include: "rules/consmsa.smk"
include: "rules/mpdpac.smk"
include: "rules/expalign.smk"
include: "rules/piaa.smk"
include: "rules/hydra_nav.smk"
include: "rules/mi_gate.smk"
include: "rules/hyper_icl.smk"
include: "rules/video_bci.smk"
include: "rules/staged_rl.smk"
include: "rules/report.smk"

mark_local_rules()  # reports, summaries, figures: run by the head job on a cluster (rules/common.smk)


rule all:
    input:
        all_targets(),
    default_target: True
