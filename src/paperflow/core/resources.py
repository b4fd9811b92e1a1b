"""Cluster resources of a stage, with one home: the config.

A rule declares its small-scale needs (what `config/config.yaml` and `config/test.yaml` need on a
laptop); `config/paper.yaml` scales them per stage under `<study>.resources.<stage>`:

    hashing:
      resources:
        train: {gpu: 1, cpus_per_gpu: 8, mem_mb: 32000, runtime: 240}

In the rule (`rules/common.smk` wraps this as `stage_resources(study, stage, ...)`):

    resources: **stage_resources("hashing", "train", mem_mb=2000, runtime=30)
    threads: 1
    shell: "python -m paperflow.core.accel launch --procs {resources.gpu} -- paperflow hashing train ..."

The SLURM plugin turns `gpu` into `--gpus=N` (`gpu_model` gives `--gpus=<model>:N`), `cpus_per_gpu`
into `--cpus-per-gpu`, `mem_mb` into `--mem` and `runtime` (minutes) into `-t`. Memory is scaled
by the attempt, so a job that failed is retried (profile `retries`) with more. Snakemake cannot tell
an out-of-memory kill from any other failure, so the scaled request is capped at the partition's
largest node: the top-level config key

    max_mem_mb: {default: 256000, <gpu-partition>: 512000}

(MB per partition; `default` for jobs whose partition the profile does not name; an empty mapping,
the schema default, means no cap). A first attempt above the cap keeps its own value (sbatch then
rejects it with SLURM's own error instead of a silently smaller job).
Site settings (partition, account, constraint) never live here: they belong in the SLURM profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# What a stage may set under `<study>.resources.<stage>`; study schemas reuse this (see
# `RESOURCES_SCHEMA`).
KEYS: dict[str, str] = {
    "gpu": "GPUs per job (0: CPU job); training stages launch this many processes",
    "gpu_model": "GPU model string for --gpus=<model>:<n> (site-specific; usually set in the profile)",
    "cpus_per_gpu": "CPUs per GPU (--cpus-per-gpu)",
    "mem_mb": "memory of the first attempt in MB (attempt k gets k times this)",
    "runtime": "wall time in minutes",
    "disk_mb": "local disk in MB",
}

RESOURCES_SCHEMA: dict[str, Any] = {
    "description": "cluster resources per stage (config/paper.yaml); see docs/cluster.md",
    "type": "object",
    "default": {},
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "gpu": {"type": "integer", "minimum": 0},
            "gpu_model": {"type": "string", "pattern": r"^[A-Za-z0-9_.]+$"},
            "cpus_per_gpu": {"type": "integer", "minimum": 1},
            "mem_mb": {"type": "integer", "minimum": 1},
            "runtime": {"type": "integer", "minimum": 1},
            "disk_mb": {"type": "integer", "minimum": 1},
        },
    },
}


def mem_cap(config: Mapping[str, Any], partition: str | None = None) -> int | None:
    """The memory cap (MB) of `partition` from `config["max_mem_mb"]`, else its `default`, else None."""
    caps = config.get("max_mem_mb") or {}
    if partition and partition in caps:
        return int(caps[partition])
    return int(caps["default"]) if "default" in caps else None


def attempt_mem(base: int, attempt: int, cap: int | None = None) -> int:
    """attempt x base, but never above `cap` (and never below the first attempt's own value)."""
    base, want = int(base), int(base) * max(1, int(attempt))
    return want if cap is None else max(base, min(want, int(cap)))


def scaled_mem(base: int, cap: int | None = None) -> Callable[..., int]:
    """Attempt-scaled memory, capped (the same convention as `mem_mb()` in rules/common.smk)."""
    base = int(base)
    return lambda wildcards, attempt: attempt_mem(base, attempt, cap)


def stage_overrides(config: Mapping[str, Any], study: str, stage: str) -> dict[str, Any]:
    """`config[study].resources[stage]` (empty when absent); unknown keys raise naming the path."""
    section = config.get(study) or {}
    res = (section.get("resources") or {}) if isinstance(section, Mapping) else {}
    over = dict(res.get(stage) or {})
    unknown = sorted(set(over) - set(KEYS))
    if unknown:
        raise ValueError(f"config error: unknown resource '{study}.resources.{stage}.{unknown[0]}' "
                         f"(known: {', '.join(sorted(KEYS))})")
    return over


def stage_resources(config: Mapping[str, Any], study: str, stage: str, *, mem_mb: int, runtime: int,
                    gpu: int = 0, partition: str | None = None, **extra: Any) -> dict[str, Any]:
    """Resources for a rule: the rule's small-scale values, overridden by the config's stage entry.

    `gpu` is always present (0 on CPU jobs) so shell commands can use `{resources.gpu}`; the SLURM
    plugin only requests GPUs when it is > 0. `partition` (the one the SLURM profile sends this rule
    to, if it names one) selects the memory cap (`max_mem_mb`).
    """
    vals: dict[str, Any] = {"mem_mb": mem_mb, "runtime": runtime, "gpu": gpu, **extra}
    vals.update(stage_overrides(config, study, stage))
    out: dict[str, Any] = {k: v for k, v in vals.items() if k not in ("mem_mb", "gpu")}
    out["mem_mb"] = scaled_mem(vals["mem_mb"], mem_cap(config, partition or extra.get("slurm_partition")))
    out["gpu"] = int(vals.get("gpu") or 0)
    if out["gpu"] <= 0:
        for k in ("gpu_model", "cpus_per_gpu"):
            out.pop(k, None)
    return out


def per_job(items: Sequence[T], n: int) -> list[list[T]]:
    """`items` in consecutive groups of `n`, in order: the cells that share one job (job granularity:
    every job pays interpreter + torch start-up once, so cells of seconds go several per job)."""
    if int(n) < 1:
        raise ValueError(f"per-job group size must be >= 1, got {n}")
    items, n = list(items), int(n)
    return [items[i:i + n] for i in range(0, len(items), n)]
