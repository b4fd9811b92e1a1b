"""DVC round trip on the test config, in a private copy of the repo (git init there):

`dvc repro bandits` (the stage runs Snakemake through paperflow.core.dvcstage) -> push to a
throwaway local remote -> delete the outputs, the cache and Snakemake's state -> `dvcstage pull`
(only bandits was ever built: the other stages are reported, not fatal) ->
byte-identical files, `dvc status` clean, nothing to rerun for DVC. Then the timestamp pitfall:
right after the pull Snakemake sees restored files with fresh, arbitrary mtimes; `dvcstage sync`
makes Snakemake agree that nothing needs to run, and a changed parameter
(`dvc exp run -S config/config.yaml:...`) still reruns exactly the affected jobs.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.cluster.conftest import env

STAGE = "bandits"
OUTS = ["results/bandits"]


def sh(args: list[str], cwd: Path, timeout: int = 900, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{' '.join(args)} -> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def digests(repo: Path) -> dict[str, str]:
    out = {}
    for o in OUTS:
        for f in sorted((repo / o).rglob("*")):
            if f.is_file():
                out[str(f.relative_to(repo))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def snakemake_jobs(repo: Path) -> dict[str, int]:
    """Jobs a dry run would execute for the stage's targets (rule -> count)."""
    from paperflow.core import dvcstage  # noqa: F401  (import check; targets come from the workflow)

    r = sh([sys.executable, "-c", "import json, sys; from paperflow.core.dvcstage import study_targets; "
            f"print(json.dumps(study_targets('{STAGE}')))"], repo)
    targets = json.loads(r.stdout.strip().splitlines()[-1])
    r = sh([sys.executable, "-m", "snakemake", *targets, "-n", "--quiet", "rules", "--configfile",
            "config/config.yaml"], repo)
    jobs: dict[str, int] = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if m and m.group(1) != "total":
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def test_dvc_repro_push_pull_roundtrip(repo_copy: Path, tmp_path: Path):
    repo = repo_copy
    # the test config, with the bandits grid cut to the CI scale (profiles/ci-slurm/bandits-small.yaml,
    # merged the way Snakemake merges config files): the round trip is about DVC, not about bandits
    cfg = yaml.safe_load((repo / "config" / "test.yaml").read_text())
    small = yaml.safe_load((repo / "profiles" / "ci-slurm" / "bandits-small.yaml").read_text())
    cfg["bandits"].update(small["bandits"])
    (repo / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    for d in ("results", "data", "models", "logs", "benchmarks", ".snakemake", ".dvc/cache", ".dvc/tmp"):
        shutil.rmtree(repo / d, ignore_errors=True)
    git = ["git", "-c", "user.email=ci@paperflow", "-c", "user.name=ci"]
    sh(["git", "init", "-q"], repo)
    sh(git + ["add", "-A"], repo)
    sh(git + ["commit", "-qm", "snapshot"], repo)
    assert (repo / ".dvc" / "config").is_file(), "the repo must ship an initialised .dvc/"
    assert "analytics = false" in (repo / ".dvc" / "config").read_text()

    r = sh(["dvc", "repro", STAGE], repo, timeout=1800)
    assert (repo / "dvc.lock").is_file()
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"][STAGE]
    assert {o["path"] for o in lock["outs"]} == set(OUTS)
    assert STAGE in lock["params"]["config/config.yaml"]  # the study's config section is a DVC param
    before = digests(repo)
    assert "results/bandits/summary.md" in before and len(before) > 10
    # Snakemake and DVC agree right after the run
    assert snakemake_jobs(repo) == {}
    sh(git + ["add", "dvc.lock"], repo)
    sh(git + ["commit", "-qm", "repro"], repo)

    remote = tmp_path / "remote"
    sh(["dvc", "remote", "add", "--local", "-d", "throwaway", str(remote)], repo)
    r = sh(["dvc", "push", STAGE], repo)
    assert remote.is_dir() and any(remote.rglob("*"))

    for o in OUTS:
        shutil.rmtree(repo / o)
    shutil.rmtree(repo / ".dvc" / "cache")
    shutil.rmtree(repo / ".snakemake")
    r = sh(["dvc", "status", STAGE], repo, check=False)
    assert "results/bandits" in r.stdout and ("deleted" in r.stdout or "not in cache" in r.stdout), r.stdout

    # a partly built pipeline (only the bandits stage was ever reproduced): a plain `dvc pull` fails on
    # the stages with nothing to fetch; `dvcstage pull` pulls every stage dvc.lock records, then syncs
    # every stage that has outputs and reports the rest
    r = sh([sys.executable, "-m", "paperflow.core.dvcstage", "pull"], repo)
    assert digests(repo) == before  # byte-identical
    assert re.search(r"synced .*: bandits$", r.stderr, re.M), r.stderr
    assert "skipped fdiv (never reproduced" in r.stderr and "NOT synced" not in r.stderr, r.stderr
    r = sh(["dvc", "status", STAGE], repo)
    assert "up to date" in r.stdout, r.stdout
    r = sh(["dvc", "status", "-c", STAGE], repo)
    assert "in sync" in r.stdout, r.stdout
    r = sh(["dvc", "repro", STAGE], repo)
    assert "didn't change, skipping" in r.stdout, r.stdout

    # the timestamp pitfall, and how we avoid it: the pull above synced; `sync` with no argument syncs
    # every stage with outputs again (bandits) and reports the never-reproduced ones, exit 0
    r = sh([sys.executable, "-m", "paperflow.core.dvcstage", "sync"], repo)
    assert re.search(r"synced .*: bandits$", r.stderr, re.M) and "skipped hashing (never reproduced" in r.stderr
    assert snakemake_jobs(repo) == {}, "after sync Snakemake must not rerun restored outputs"
    assert digests(repo) == before

    # a parameter change through DVC reruns only the jobs it touches (one algorithm's cells)
    assert "rs_oful" in cfg["bandits"]["algorithms"]
    r = sh(["dvc", "exp", "run", STAGE, "-S", "config/config.yaml:bandits.algorithms.rs_oful.C=2.5"], repo,
           timeout=1800)
    assert "Running stage" in r.stdout or "Running stage" in r.stderr, r.stdout
    after = digests(repo)
    assert after["results/bandits/metrics.json"] != before["results/bandits/metrics.json"]
    m = re.search(r"^bandits_simulate\s+(\d+)\s*$", r.stdout + r.stderr, re.M)
    n_sim = int(m.group(1)) if m else 0
    n_runs = sum(1 for f in before if "/runs/" in f and f.endswith(".json") and not f.endswith("manifest.json"))
    assert 0 < n_sim < n_runs, f"Snakemake reran {n_sim} of {n_runs} simulations; only rs_oful's should rerun"
