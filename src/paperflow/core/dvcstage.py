"""DVC <-> Snakemake glue. dvc.yaml has one stage per study whose command is

    python -m paperflow.core.dvcstage run <study>

It runs Snakemake on that study's final targets (`STUDY_TARGETS[<study>]` from the workflow, so the
targets have one home: rules/<study>.smk) with `config/config.yaml` (the DVC params file), and
makes sure the stage's declared output folders exist. DVC decides *whether* a study must run
(hashes of code, rules, envs and the study's config section); Snakemake decides *which jobs*.

The timestamp pitfall: files that DVC restores (`dvc pull`, `dvc checkout`, `dvc exp apply`) get
fresh, arbitrary mtimes, and the Snakemake provenance in `.snakemake/` (params, code, checksums)
is either absent (fresh clone) or describes other files (another experiment). Snakemake would then
rerun jobs whose inputs merely look newer, or, worse, miss a changed parameter because there is
no record to compare with. We avoid both:

* `python -m paperflow.core.dvcstage sync [study ...]` after `dvc pull`/`dvc checkout`: checks with
  `dvc status` that the study's outputs match its code and params, then runs `snakemake --touch
  --forceall` on its targets: mtimes are set in DAG order and Snakemake records the current
  params/code for every output (nothing is recomputed). Later changes rerun only what they touch.
* `run` keeps a stamp (`.snakemake/paperflow-dvc/<study>.json`: digests of the study's target
  files as this workspace's Snakemake last left them). If the targets on disk differ from the stamp
  (restored by DVC and not synced), Snakemake's records cannot be trusted and the whole study is
  rerun (`--forceall`) instead of silently keeping stale results.

Never call dvc from a rule, and never call this module's `sync` inside a DVC stage (DVC holds its
repository lock while a stage runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT_CONFIG = "config/config.yaml"
STAMP_DIR = Path(".snakemake") / "paperflow-dvc"


def study_targets(study: str, configfile: str = DEFAULT_CONFIG) -> list[str]:
    """The study's final targets as the workflow declares them (STUDY_TARGETS)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        wf = api.workflow(resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[Path(configfile)]),
                          storage_settings=StorageSettings(), snakefile=Path("Snakefile"), workdir=Path("."))
        g = wf._workflow.globals
        targets = list(g["STUDY_TARGETS"].get(study, []))
        summary = g["STUDY_SUMMARIES"].get(study)
    if summary and summary not in targets:
        targets.append(summary)
    return targets


def _digest(paths: Sequence[str]) -> dict[str, str | None]:
    from paperflow.core.io import file_digest

    return {p: file_digest(p) if Path(p).exists() else None for p in paths}


def _stamp_path(study: str) -> Path:
    return STAMP_DIR / f"{study}.json"


def _write_stamp(study: str, targets: Sequence[str]) -> None:
    STAMP_DIR.mkdir(parents=True, exist_ok=True)
    tmp = _stamp_path(study).with_suffix(".tmp")
    tmp.write_text(json.dumps(_digest(targets), indent=1, sort_keys=True))
    os.replace(tmp, _stamp_path(study))


def provenance_ok(study: str, targets: Sequence[str]) -> bool:
    """True when no target exists yet, or the targets are what this workspace's Snakemake made."""
    now = _digest(targets)
    if all(v is None for v in now.values()):
        return True
    try:
        return json.loads(_stamp_path(study).read_text()) == now
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def _snakemake(args: Sequence[str]) -> int:
    cmd = [sys.executable, "-m", "snakemake", *args]
    print("[dvcstage] " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.call(cmd)


def run(studies: Sequence[str], configfile: str, cores: str, outs: Sequence[str], extra: Sequence[str],
        targets: Sequence[str] | None = None) -> int:
    study = "+".join(studies)
    targets = list(targets) if targets else [t for s in studies for t in study_targets(s, configfile)]
    if not targets:
        print(f"[dvcstage] {study}: not enabled in {configfile}; nothing to run", file=sys.stderr)
        for o in outs:
            Path(o).mkdir(parents=True, exist_ok=True)
        return 0
    args = ["--cores", cores, "--configfile", configfile, *extra]
    if not provenance_ok(study, targets):
        print(f"[dvcstage] {study}: outputs on disk were not made by this workspace's Snakemake "
              "(restored by DVC?); its records cannot be trusted, rerunning the whole study. "
              "Run `python -m paperflow.core.dvcstage sync` after `dvc pull` to avoid this.",
              file=sys.stderr, flush=True)
        args.append("--forceall")
    rc = _snakemake([*targets, *args])
    if rc != 0:
        return rc
    _write_stamp(study, targets)
    for o in outs:  # declared DVC outputs must exist even when a study writes nothing there
        Path(o).mkdir(parents=True, exist_ok=True)
    return 0


def _dvc_stage_clean(stage: str) -> tuple[bool, str]:
    r = subprocess.run(["dvc", "status", "--json", stage], capture_output=True, text=True)
    if r.returncode != 0:
        return False, r.stderr.strip() or r.stdout.strip()
    try:
        status = json.loads(r.stdout or "{}")
    except json.JSONDecodeError:
        return False, r.stdout
    return not status, json.dumps(status)


def sync(stages: dict[str, tuple[list[str], list[str] | None]], configfile: str) -> int:
    """stage -> (studies, explicit targets or None: the studies' STUDY_TARGETS)."""
    for stage, (studies, explicit) in stages.items():
        targets = explicit or [t for s in studies for t in study_targets(s, configfile)]
        if not targets:
            continue  # disabled study
        clean, detail = _dvc_stage_clean(stage)
        if not clean:
            print(f"[dvcstage] {stage}: `dvc status` is not clean ({detail}); not touching. "
                  f"Run `dvc pull {stage}` or `dvc repro {stage}` first.", file=sys.stderr)
            return 1
        rc = _snakemake([*targets, "--cores", "1", "--touch", "--forceall", "--quiet", "all",
                         "--configfile", configfile])
        if rc != 0:
            return rc
        _write_stamp("+".join(studies), targets)
        print(f"[dvcstage] {stage}: Snakemake records synced with the restored outputs", file=sys.stderr)
    return 0


def dvc_stages(dvc_yaml: str = "dvc.yaml") -> dict[str, tuple[list[str], list[str] | None]]:
    """Stages of dvc.yaml that run through this module: (studies, explicit --targets or None)."""
    import shlex

    import yaml

    out: dict[str, tuple[list[str], list[str] | None]] = {}
    for name, d in ((yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {})).items():
        argv = shlex.split(str(d.get("cmd", "")))
        if "paperflow.core.dvcstage" not in argv or "run" not in argv:
            continue
        def values(after: list[str]) -> list[str]:
            return after[: next((k for k, t in enumerate(after) if t.startswith("-")), len(after))]

        studies = values(argv[argv.index("run") + 1:])
        targets = values(argv[argv.index("--targets") + 1:]) if "--targets" in argv else None
        out[name] = (studies, targets)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m paperflow.core.dvcstage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    pr = sub.add_parser("run", help="run Snakemake for a study (the command of its dvc.yaml stage); "
                        "extra snakemake arguments after --")
    pr.add_argument("study", nargs="+", help="study (several when they share output folders)")
    pr.add_argument("--configfile", default=DEFAULT_CONFIG)
    pr.add_argument("--cores", default="all")
    pr.add_argument("--outs", nargs="*", default=[], help="output folders the stage declares")
    pr.add_argument("--targets", nargs="*", default=None,
                    help="Snakemake targets (default: the study's STUDY_TARGETS)")
    ps = sub.add_parser("sync", help="after dvc pull/checkout: record restored outputs as up to date")
    ps.add_argument("stages", nargs="*", help="default: every dvcstage stage in dvc.yaml")
    ps.add_argument("--configfile", default=DEFAULT_CONFIG)
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # run ... -- <extra snakemake args>
    a = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if a.action == "run":
        return run(a.study, a.configfile, a.cores, a.outs, extra, a.targets)
    stages = dvc_stages()
    if a.stages:
        unknown = sorted(set(a.stages) - set(stages))
        if unknown:
            p.error(f"not a dvcstage stage of dvc.yaml: {unknown}")
        stages = {k: v for k, v in stages.items() if k in a.stages}
    return sync(stages, a.configfile)


if __name__ == "__main__":
    sys.exit(main())
