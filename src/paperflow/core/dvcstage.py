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

* `python -m paperflow.core.dvcstage sync [stage ...]` after `dvc pull`/`dvc checkout`: for every
  stage that has outputs (all dvcstage stages of dvc.yaml by default) it checks with `dvc status` that
  the outputs match the stage's code and params, then runs `snakemake --touch --forceall` on its
  targets: mtimes are set in DAG order and Snakemake records the current params/code for every output
  (nothing is recomputed). Later changes rerun only what they touch. Stages that were never
  reproduced (no outputs, or not in dvc.lock) and stages whose outputs do not match are reported and
  skipped; the others are synced (exit 1 when a stage with outputs could not be synced).
* `python -m paperflow.core.dvcstage pull`: `dvc pull` of exactly the stages that dvc.lock records
  (a plain `dvc pull` fails on a partly built pipeline: the unbuilt stages have nothing to fetch),
  then `sync`.
* `run` keeps a stamp (`.snakemake/paperflow-dvc/<study>.json`: digests of the study's target
  files as this workspace's Snakemake last left them). If the targets on disk differ from the stamp
  (restored by DVC and not synced), Snakemake's records cannot be trusted and the whole study is
  rerun (`--forceall`) instead of silently keeping stale results.

Where the stage runs Snakemake: locally with `--cores all` by default. `PAPERFLOW_DVC_PROFILE=slurm`
runs it with that Snakemake profile instead (the cluster; no --cores), and `PAPERFLOW_DVC_CONFIGFILE`
replaces config/config.yaml (e.g. config/paper.yaml, which every stage lists as a dep so DVC reruns
the gate when it changes; its params are tracked only for config/config.yaml):

    PAPERFLOW_DVC_PROFILE=slurm PAPERFLOW_DVC_CONFIGFILE=config/paper.yaml dvc repro hashing

`dvc exp run --temp` / `--queue` run in a fresh temporary workspace without `.snakemake/` (Snakemake's
records of params and code) and without the stamp, so there the study is rerun whole (`--forceall`):
results restored by DVC cannot be checked against a parameter change without those records. Run
experiments in the workspace (`dvc exp run -S ...`, no --temp/--queue) to rerun only what changed.

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
PROFILE_ENV = "PAPERFLOW_DVC_PROFILE"
CONFIG_ENV = "PAPERFLOW_DVC_CONFIGFILE"
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
    profile = os.environ.get(PROFILE_ENV)
    where = ["--profile", profile] if profile else ["--cores", cores]
    args = [*where, "--configfile", configfile, *extra]
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


def _locked_stages(lock: str = "dvc.lock") -> set[str]:
    """Stages that dvc.lock records (those that were reproduced at least once)."""
    import yaml

    try:
        return set(((yaml.safe_load(Path(lock).read_text()) or {}).get("stages") or {}))
    except FileNotFoundError:
        return set()


def _stage_outs(stage: str, dvc_yaml: str = "dvc.yaml") -> list[str]:
    import yaml

    d = ((yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages") or {}).get(stage) or {}
    return [next(iter(o)) if isinstance(o, dict) else str(o) for o in d.get("outs", [])]


def _has_outputs(stage: str) -> bool:
    return any(Path(o).exists() and (not Path(o).is_dir() or any(Path(o).iterdir())) for o in _stage_outs(stage))


def sync(stages: dict[str, tuple[list[str], list[str] | None]], configfile: str, dry_run: bool = False) -> int:
    """stage -> (studies, explicit targets or None: the studies' STUDY_TARGETS). Syncs every stage
    that has outputs and whose `dvc status` is clean; reports the others."""
    locked = _locked_stages()
    synced, skipped, failed = [], [], []
    for stage, (studies, explicit) in stages.items():
        if stage not in locked or not _has_outputs(stage):
            skipped.append(f"{stage} (never reproduced: " + ("no outputs on disk)" if stage in locked
                                                            else "not in dvc.lock)"))
            continue
        targets = explicit or [t for s in studies for t in study_targets(s, configfile)]
        if not targets:
            skipped.append(f"{stage} (not enabled in {configfile})")
            continue
        clean, detail = _dvc_stage_clean(stage)
        if not clean:
            failed.append(f"{stage}: `dvc status` is not clean ({detail}); run `dvc pull {stage}` or "
                          f"`dvc repro {stage}`")
            continue
        cmd = [*targets, "--cores", "1", "--touch", "--forceall", "--quiet", "all", "--configfile", configfile]
        if dry_run:
            print("[dvcstage] would run: snakemake " + " ".join(cmd), file=sys.stderr)
            synced.append(stage)
            continue
        if _snakemake(cmd) != 0:
            failed.append(f"{stage}: snakemake --touch failed")
            continue
        _write_stamp("+".join(studies), targets)
        synced.append(stage)
    print(f"[dvcstage] synced (Snakemake records match the restored outputs): {', '.join(synced) or 'none'}",
          file=sys.stderr)
    for s_ in skipped:
        print(f"[dvcstage] skipped {s_}", file=sys.stderr)
    for f in failed:
        print(f"[dvcstage] NOT synced {f}", file=sys.stderr)
    return 1 if failed else 0


def pull(stages: dict[str, tuple[list[str], list[str] | None]], configfile: str, dry_run: bool = False) -> int:
    """`dvc pull` of the stages dvc.lock records (all of them by default), then `sync`."""
    locked = [s for s in stages if s in _locked_stages()]
    if not locked:
        print("[dvcstage] dvc.lock records no stage: nothing to pull (run `dvc repro` first)", file=sys.stderr)
        return 0
    cmd = ["dvc", "pull", *locked]
    print("[dvcstage] " + " ".join(cmd), file=sys.stderr, flush=True)
    if not dry_run:
        rc = subprocess.call(cmd)
        if rc != 0:
            return rc
    return sync(stages, configfile, dry_run)  # syncs the pulled stages, reports the others


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
    pr.add_argument("--configfile", default=None, help=f"default: ${CONFIG_ENV} or {DEFAULT_CONFIG}")
    pr.add_argument("--cores", default="all")
    pr.add_argument("--outs", nargs="*", default=[], help="output folders the stage declares")
    pr.add_argument("--targets", nargs="*", default=None,
                    help="Snakemake targets (default: the study's STUDY_TARGETS)")
    for action, help_ in (("sync", "after dvc pull/checkout: record restored outputs as up to date"),
                          ("pull", "dvc pull the stages dvc.lock records, then sync")):
        ps = sub.add_parser(action, help=help_)
        ps.add_argument("stages", nargs="*", help="default: every dvcstage stage in dvc.yaml")
        ps.add_argument("--configfile", default=None, help=f"default: ${CONFIG_ENV} or {DEFAULT_CONFIG}")
        ps.add_argument("-n", "--dry-run", action="store_true", help="print what would run")
    pr.add_argument("-n", "--dry-run", action="store_true", help="print the snakemake command, run nothing")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # run ... -- <extra snakemake args>
    a = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    configfile = a.configfile or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    if a.action == "run":
        if a.dry_run:
            profile = os.environ.get(PROFILE_ENV)
            where = ["--profile", profile] if profile else ["--cores", a.cores]
            print("snakemake <targets of " + " ".join(a.study) + "> " + " ".join([*where, "--configfile", configfile, *extra]))
            return 0
        return run(a.study, configfile, a.cores, a.outs, extra, a.targets)
    stages = dvc_stages()
    if a.stages:
        unknown = sorted(set(a.stages) - set(stages))
        if unknown:
            p.error(f"not a dvcstage stage of dvc.yaml: {unknown}")
        stages = {k: v for k, v in stages.items() if k in a.stages}
    return (pull if a.action == "pull" else sync)(stages, configfile, a.dry_run)


if __name__ == "__main__":
    sys.exit(main())
