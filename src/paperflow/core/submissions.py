"""How many sbatch submissions a Snakemake run makes, per study (docs/cluster.md, "How many sbatch jobs").

    python -m paperflow.core.submissions                      # all --profile slurm (paper scale)
    python -m paperflow.core.submissions all --profile slurm --configfile config/test.yaml
    python -m paperflow.core.submissions --standins /tmp/standins all --profile slurm

`--standins DIR` plans a config whose datasets live on the cluster on a machine without them: the
config (the one given with --configfile, else config/paper.yaml) is copied with every absolute path
that does not exist replaced by an empty stand-in file or folder under DIR (same names).

Cluster tooling run by hand or by the docs test; no stage imports it (it imports Snakemake).
"""

from __future__ import annotations

def count_submissions(dry_run_output: str, local_rules: set[str]) -> dict[str, dict[str, int]]:
    """Per study (rule-name prefix): {"jobs", "submissions", "local"} from `snakemake -n` output.

    A group job (`Group job <id>`) is one submission however many jobs it holds; an ungrouped job is one
    submission unless its rule is local (run by the head job).
    """
    import re

    out: dict[str, dict[str, int]] = {}

    from paperflow.core.config import study_names

    # longest study name that prefixes the rule (study names may hold underscores: hydra_nav_train)
    names = sorted(study_names(), key=len, reverse=True)

    def row(rule: str) -> dict[str, int]:
        study = "summary" if rule == "summary_all" else next(
            (n for n in names if rule.startswith(n + "_")), rule.split("_", 1)[0])
        return out.setdefault(study, {"jobs": 0, "submissions": 0, "local": 0})

    in_group = group_open = False
    for line in dry_run_output.splitlines():
        if re.search(r"\] Group job \S+ \(", line):
            in_group, group_open = True, True
            continue
        m = re.match(r"^(\s*)(?:local)?rule (\w+):$", line)
        if not m or m.group(2) == "all":
            continue
        rule, indented = m.group(2), bool(m.group(1))
        r = row(rule)
        r["jobs"] += 1
        if indented and in_group:
            if group_open:  # the group's first member: the group is one submission, under its study
                r["submissions"] += 1
                group_open = False
            continue
        in_group = False
        if rule in local_rules:
            r["local"] += 1
        else:
            r["submissions"] += 1
    return out


def submissions(argv: list[str]) -> int:
    """`python -m paperflow.core.submissions [snakemake args]`: plan the whole DAG (--forceall,
    dry run) with the given profile/config (default `all --profile slurm`) and print, per study, the
    jobs, the sbatch submissions (group jobs count once) and the jobs run locally by the head job."""
    import subprocess
    import sys

    from snakemake.api import SnakemakeApi  # noqa: F401  (fail early without snakemake)

    argv = list(argv)
    if "--standins" in argv:
        i = argv.index("--standins")
        root = argv[i + 1]
        del argv[i:i + 2]
        argv = with_standins(argv or ["all", "--profile", "slurm"], root)
    args = argv or ["all", "--profile", "slurm"]
    cmd = [sys.executable, "-m", "snakemake", *args, "-n", "--forceall"]
    print("[submissions] " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        return r.returncode
    local = _local_rules()
    table = count_submissions(r.stdout, local)
    print(f"{'study':14s} {'jobs':>7s} {'sbatch':>7s} {'local':>6s}")
    for study, v in sorted(table.items()):
        print(f"{study:14s} {v['jobs']:7d} {v['submissions']:7d} {v['local']:6d}")
    tot = {k: sum(v[k] for v in table.values()) for k in ("jobs", "submissions", "local")}
    print(f"{'total':14s} {tot['jobs']:7d} {tot['submissions']:7d} {tot['local']:6d}")
    return 0


def standin_config(config: dict, root: str):
    """`config` with absolute paths that do not exist replaced by empty stand-ins under `root`."""
    from pathlib import Path

    if isinstance(config, dict):
        return {k: standin_config(v, root) for k, v in config.items()}
    if isinstance(config, list):
        return [standin_config(v, root) for v in config]
    if isinstance(config, str) and config.startswith("/") and not Path(config).exists():
        p = Path(root) / config.lstrip("/")
        if p.suffix:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        else:
            p.mkdir(parents=True, exist_ok=True)
        return str(p)
    return config


def with_standins(args: list[str], root: str) -> list[str]:
    """Snakemake args whose config files are replaced by stand-in copies (see standin_config)."""
    from pathlib import Path

    import yaml

    args = list(args)
    if "--configfile" in args:
        i = args.index("--configfile")
        j = next((k for k in range(i + 1, len(args)) if args[k].startswith("-")), len(args))
        files, rest = args[i + 1:j], args[:i] + args[j:]
    else:
        files, rest = ["config/paper.yaml"], args
    out = []
    for f in files:
        cfg = standin_config(yaml.safe_load(Path(f).read_text()), root)
        dst = Path(root) / f"standin-{Path(f).name}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(yaml.safe_dump(cfg, sort_keys=False))
        out.append(str(dst))
    return [*rest, "--configfile", *out]


def _local_rules() -> set[str]:
    """Rules the workflow marks local (rules/common.smk: local_rule_names)."""
    from pathlib import Path

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        wf = api.workflow(resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[Path("config/config.yaml")]),
                          storage_settings=StorageSettings(), snakefile=Path("Snakefile"), workdir=Path("."))
        return set(wf._workflow._localrules)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] in (["-h"], ["--help"]):
        sys.exit("usage: python -m paperflow.core.submissions [snakemake args, default: all --profile slurm]")
    sys.exit(submissions(sys.argv[1:]))
