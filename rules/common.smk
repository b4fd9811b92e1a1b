# Helpers shared by every study: config validation, enabled studies, targets, resources.
import json
import os
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from paperflow.core.config import ConfigError, enabled_studies, validate_config

_CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config/config.yaml"
try:
    validate_config(config, _CONFIG_SOURCE)
except ConfigError as _e:
    raise WorkflowError(str(_e)) from None

# How jobs find the project's code: never installed into the jobs' environments. Every job gets
# PYTHONPATH=<repo>/src, and `paperflow` on PATH is a tiny launcher (`python -m paperflow.cli`, written to
# .snakemake/paperflow-bin/) that runs under whichever python the job has: the venv's (the head's
# interpreter dir goes first on PATH), or, with `--sdm conda`, the rule's envs/<study>.yaml env (conda
# activates it before this prefix runs, so the venv dir is NOT put in front then).
SRC_DIR = Path(workflow.basedir).resolve() / "src"
_BIN_DIR = Path(workflow.basedir).resolve() / ".snakemake" / "paperflow-bin"


def _write_launcher() -> None:
    text = "#!/usr/bin/env python\nimport sys\nfrom paperflow.cli import main\n\nsys.exit(main())\n"
    f = _BIN_DIR / "paperflow"
    try:
        if f.is_file() and f.read_text() == text:
            return
        _BIN_DIR.mkdir(parents=True, exist_ok=True)
        tmp = _BIN_DIR / f".paperflow.{os.getpid()}.tmp"
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, f)
    except OSError:  # read-only checkout: jobs fall back to an installed `paperflow`
        pass


_write_launcher()
_USES_CONDA = "conda" in {str(getattr(m, "name", m)).lower() for m in workflow.deployment_settings.deployment_method}
_JOB_PATH = [str(_BIN_DIR)] + ([] if _USES_CONDA else [str(Path(sys.executable).parent)])
shell.prefix(
    "set -euo pipefail; "
    f"export PATH={shlex.quote(':'.join(_JOB_PATH))}:\"$PATH\" "
    f"PYTHONPATH={shlex.quote(str(SRC_DIR))}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
)

RESULTS = config["results_dir"]
ENABLED = enabled_studies(config)
# study name -> list of final targets; each rules/<study>.smk fills its entry when enabled
STUDY_TARGETS: dict[str, list[str]] = {}
# the study's summary.md (its manifest holds the claims table that results/summary.md aggregates)
STUDY_SUMMARIES: dict[str, str] = {}


wildcard_constraints:
    seed=r"\d+",


def as_json(obj) -> str:
    """Parameters a job depends on, as one JSON string (Snakemake reruns the job when it changes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def mem_mb(base: int):
    """Attempt-scaled memory: a failed job is retried with more, up to `max_mem_mb` (its default
    partition's cap; rules that the profile sends elsewhere should use stage_resources)."""
    return _scaled_mem(base, _mem_cap(config, _profile_partition(None)))


def all_targets() -> list[str]:
    targets = [t for study in ENABLED for t in STUDY_TARGETS.get(study, [])]
    if ENABLED:
        targets.append(f"{RESULTS}/summary.md")
    return targets


# ---- cluster resources (the SLURM/GPU conventions; see docs/cluster.md) ----------------------------
from paperflow.core.resources import mem_cap as _mem_cap
from paperflow.core.resources import scaled_mem as _scaled_mem
from paperflow.core.resources import stage_resources as _stage_resources


def _resource_value(v):
    return getattr(v, "value", v)


def _profile_partition(rule: str | None):
    """The partition the profile sends `rule` to (set-resources, else default-resources), if it names one."""
    rs = workflow.resource_settings
    try:
        over = (rs.overwrite_resources or {}).get(rule) if rule else None
        if over is not None and "slurm_partition" in over:
            return str(_resource_value(over["slurm_partition"]))
        dflt = rs.default_resources
        dflt = getattr(dflt, "_data", dflt) if dflt is not None else None
        if dflt is not None and "slurm_partition" in dflt:
            return str(_resource_value(dflt["slurm_partition"]))
    except (TypeError, AttributeError, KeyError):
        pass
    return None


def stage_resources(study: str, stage: str, *, mem_mb: int, runtime: int, gpu: int = 0, **extra):
    """A rule's resources: its small-scale values, overridden by `<study>.resources.<stage>` in the
    config (config/paper.yaml asks for GPUs, memory and time there). Use as
    `resources: **stage_resources("hashing", "train", mem_mb=2000, runtime=30)`; mem_mb is
    attempt-scaled up to the `max_mem_mb` cap of the partition the profile sends rule
    `<study>_<stage>` to; `{resources.gpu}` (0 on CPU) feeds `python -m paperflow.core.accel launch --procs`."""
    try:
        return _stage_resources(config, study, stage, mem_mb=mem_mb, runtime=runtime, gpu=gpu,
                                partition=_profile_partition(f"{study}_{stage}"), **extra)
    except ValueError as e:
        raise WorkflowError(f"{e} in {_CONFIG_SOURCE}") from None


# ---- local rules -------------------------------------------------------------------------------------
# On a cluster, reports, summaries and figures run inside the head Snakemake process instead of as
# sbatch jobs of their own (seconds each; a cluster should not see one submission per report).
# The Snakefile calls mark_local_rules() once every rules/*.smk is included.
LOCAL_RULE_PATTERN = re.compile(r"^summary_all$|_(summary|figures|report)$")


def local_rule_names() -> list[str]:
    return sorted(r.name for r in workflow.rules if LOCAL_RULE_PATTERN.search(r.name))


def mark_local_rules() -> None:
    workflow.localrules(*local_rule_names())
    _announce_study_summaries()


# ---- per-study progress (src/paperflow/core/progress.py) ---------------------------------------------
# Before the first job: jobs to run per study. When a study's summary job starts: a line saying that
# study is done. After a successful run: where the verdicts are.
from paperflow.core.progress import format_plan as _format_plan
from paperflow.core.progress import study_job_counts as _study_job_counts
from paperflow.core.progress import summary_message as _summary_message


def _announce_study_summaries() -> None:
    """Give each enabled study's summary rule a `message` (Snakemake prints it when the job starts)."""
    for study, summary in STUDY_SUMMARIES.items():
        for r in workflow.rules:
            if summary in [str(o) for o in r.output]:
                r.message = _summary_message(study, summary)


onstart:
    print(_format_plan(_study_job_counts((j.rule.name for j in workflow.dag.needrun_jobs()), ENABLED), ENABLED),
          file=sys.stderr)


onsuccess:
    if ENABLED and os.path.exists(f"{RESULTS}/summary.md"):
        print(f"paperflow: done; every study's claims and verdicts: {RESULTS}/summary.md", file=sys.stderr)
