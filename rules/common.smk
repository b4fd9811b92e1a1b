# Helpers shared by every study: config validation, enabled studies, targets, resources.
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from paperflow.core.config import ConfigError, enabled_studies, validate_config

_CONFIG_SOURCE = ", ".join(str(f) for f in workflow.configfiles) or "config/config.yaml"
try:
    validate_config(config, _CONFIG_SOURCE)
except ConfigError as _e:
    raise WorkflowError(str(_e)) from None

# Rules call the project's CLI (`paperflow ...`, `python -m paperflow...`). With the venv (or a cluster env)
# activated they are on PATH. When Snakemake is started as `.venv/bin/snakemake` without activating, the
# interpreter running Snakemake has them in its own bin dir: put that dir first on the jobs' PATH.
if not shutil.which("paperflow"):
    shell.prefix(f"set -euo pipefail; export PATH={shlex.quote(str(Path(sys.executable).parent))}:\"$PATH\"; ")

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
    """Attempt-scaled memory: a job that ran out of memory is retried with more."""
    return lambda wildcards, attempt: base * attempt


def all_targets() -> list[str]:
    targets = [t for study in ENABLED for t in STUDY_TARGETS.get(study, [])]
    if ENABLED:
        targets.append(f"{RESULTS}/summary.md")
    return targets


# ---- cluster resources (appended for the SLURM/GPU conventions; see docs/cluster.md) -------------
from paperflow.core.resources import stage_resources as _stage_resources


def stage_resources(study: str, stage: str, *, mem_mb: int, runtime: int, gpu: int = 0, **extra):
    """A rule's resources: its small-scale values, overridden by `<study>.resources.<stage>` in the
    config (config/paper.yaml asks for GPUs, memory and time there). Use as
    `resources: **stage_resources("hashing", "train", mem_mb=2000, runtime=30)`; mem_mb is
    attempt-scaled; `{resources.gpu}` (0 on CPU) feeds `python -m paperflow.core.accel launch --procs`."""
    try:
        return _stage_resources(config, study, stage, mem_mb=mem_mb, runtime=runtime, gpu=gpu, **extra)
    except ValueError as e:
        raise WorkflowError(f"{e} in {_CONFIG_SOURCE}") from None
