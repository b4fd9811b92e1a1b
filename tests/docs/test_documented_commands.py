"""Every shell command in the code blocks of README.md and docs/*.md must work as written.

Commands are taken from ```bash / ```sh blocks (continuation lines joined, comments dropped, `&&`/`;`
split, `sbatch --wrap "..."` unwrapped, `VAR=value` prefixes kept as environment). Then:

- `snakemake ...`: dry-run (`-n`) in a private copy of the repo. Commands that differ only in targets,
  `--cores` and `--forcerun` share one invocation per config/profile (targets and forced rules united),
  run side by side. The cluster datasets named in config/paper.yaml do not exist here: in the copy they
  are empty stand-in files at the same paths' names (the paths are rewritten), so the paper-scale DAG
  is planned as on the cluster.
- `python -m paperflow.core.submissions ARGS`: the same dry run as `snakemake ARGS`; its
  submission count must equal the table in docs/cluster.md.
- `python -m paperflow.core.dvcstage ...`: run with `--dry-run`.
- `paperflow ...`: `studies` and `config` run; a stage command must name a real study and stage and
  only options its `--help` lists.
- `dvc repro|pull|push [stage]`: the stages exist in dvc.yaml; `dvc exp run -S file:key=value`: the
  key exists in that file.
- `make X`: `make -n X`.
- Anything else must be on the NOT_RUN list (with the reason it cannot run here); an unknown command
  fails the test, so a new documented command gets checked or explicitly listed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.cluster.conftest import REPO, copy_tree, env
from paperflow.core.submissions import standin_config

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# commands that cannot run here, and why
NOT_RUN = {
    "cp": "copies the profile into the user's config dir",
    "mkdir": "creates a folder",
    "git": "commits",
    "pip": "installs packages",
    "source": "activates the venv (the tests already run in it)",
    ".": "activates the venv (the tests already run in it)",
    "srun": "needs a SLURM allocation with GPUs",
    "dvc remote": "configures a remote",
    "dvc status": "reads the workspace's DVC state",
}


def doc_commands() -> list[tuple[str, str]]:
    """(where, simple command) for every command in the docs' shell code blocks."""
    out = []
    for f in DOCS:
        text = f.read_text()
        for m in re.finditer(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.S | re.M):
            if m.group(1) not in SHELL_LANGS:
                continue
            body = re.sub(r"\\\n\s*", " ", m.group(2))
            for line in body.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                where = f"{f.relative_to(REPO)}: {line[:90]}"
                for cmd in _simple_commands(line):
                    out.append((where, cmd))
    return out


def _simple_commands(line: str) -> list[str]:
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    cmds, cur = [], []
    for tok in lex:
        if tok in ("&&", ";", "||", "&", "|"):
            if cur:
                cmds.append(shlex.join(cur))
            cur = []
        else:
            cur.append(tok)
    if cur:
        cmds.append(shlex.join(cur))
    res = []
    for c in cmds:
        argv = shlex.split(c)
        if argv and argv[0] == "sbatch":  # the job's command is what matters
            wrap = next((a.split("=", 1)[1] for a in argv if a.startswith("--wrap=")), None)
            if wrap is None and "--wrap" in argv:
                wrap = argv[argv.index("--wrap") + 1]
            assert wrap, f"sbatch without --wrap: {c}"
            res += _simple_commands(wrap)
        else:
            res.append(c)
    return res


COMMANDS = doc_commands()


def _split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    e = {}
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        k, _, v = argv.pop(0).partition("=")
        e[k] = v
    return e, argv


def _kind(argv: list[str]) -> str:
    if argv[0] in ("snakemake", ".venv/bin/snakemake"):
        return "snakemake"
    if argv[:3] == ["python", "-m", "paperflow.core.submissions"]:
        return "submissions"
    if argv[:3] == ["python", "-m", "paperflow.core.dvcstage"]:
        return "dvcstage"
    if argv[0] == "paperflow":
        return "paperflow"
    if argv[0] == "make":
        return "make"
    if argv[0] == "dvc":
        return "dvc " + argv[1] if f"dvc {argv[1]}" in NOT_RUN else "dvc"
    return argv[0]


def test_docs_have_commands():
    kinds = {_kind(_split_env(shlex.split(c))[1]) for _, c in COMMANDS}
    assert {"snakemake", "dvc", "dvcstage"} <= kinds, kinds


@pytest.mark.parametrize("where,cmd", COMMANDS, ids=[f"{i}" for i in range(len(COMMANDS))])
def test_every_command_is_checked_or_listed(where, cmd):
    kind = _kind(_split_env(shlex.split(cmd))[1])
    assert kind in {"snakemake", "submissions", "dvcstage", "paperflow", "make", "dvc"} | set(NOT_RUN), (
        f"{where}: `{cmd}` is neither checked by this test nor listed in NOT_RUN")


# ---- snakemake: dry runs in a copy with the cluster datasets stood in --------------------------------
def _localize(obj, root: Path):
    """Absolute paths that do not exist here -> empty placeholders under `root` (files keep names)."""
    return standin_config(obj, str(root))


@pytest.fixture(scope="module")
def doc_repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    repo = copy_tree(root / "repo")
    for f in ("paper.yaml",):
        cfg = yaml.safe_load((repo / "config" / f).read_text())
        (repo / "config" / f).write_text(yaml.safe_dump(_localize(cfg, root / "cluster"), sort_keys=False))
    return repo


def _smk_parse(args: list[str]):
    from snakemake.cli import get_argument_parser

    return get_argument_parser().parse_args(args)


MERGEABLE = {"targets", "cores", "forcerun", "dryrun"}


def _smk_groups() -> dict[tuple, dict]:
    """Documented snakemake invocations, merged where they differ only in MERGEABLE options."""
    groups: dict[tuple, dict] = {}
    for where, cmd in COMMANDS:
        e, argv = _split_env(shlex.split(cmd))
        kind = _kind(argv)
        if kind == "snakemake":
            args = argv[1:]
        elif kind == "submissions":  # the copy has stand-ins already: drop --standins DIR
            args = list(argv[3:])
            if "--standins" in args:
                del args[args.index("--standins"):args.index("--standins") + 2]
            args = args or ["all", "--profile", "slurm"]
        else:
            continue
        ns = _smk_parse(args)
        key = tuple(sorted((k, repr(v)) for k, v in vars(ns).items()
                           if k not in MERGEABLE and " object at 0x" not in repr(v))) + tuple(sorted(e.items()))
        g = groups.setdefault(key, {"args": args, "env": e, "targets": [], "forcerun": [], "where": [],
                                    "default_target": False, "ns": ns})
        g["where"].append(where)
        g["targets"] += [t for t in ns.targets if t not in g["targets"]]
        g["default_target"] |= not ns.targets
        g["forcerun"] += [r for r in (ns.forcerun or []) if r not in g["forcerun"]]
    return groups


def _invocation(g: dict) -> list[str]:
    drop = set(g["ns"].targets) | set(g["ns"].forcerun or [])
    rest, skip = [], False
    for a in g["args"]:
        if skip and a.startswith("-"):
            skip = False
        if a in ("--forcerun", "-R"):
            skip = True
            continue
        if (skip or a in drop) and not a.startswith("-"):
            continue
        if a in ("-n", "--dry-run", "--dryrun"):
            continue
        rest.append(a)
    targets = g["targets"] + (["all"] if g["default_target"] and g["targets"] else [])
    extra = ["--forcerun", *g["forcerun"]] if g["forcerun"] else []
    return [sys.executable, "-m", "snakemake", *targets, *rest, *extra, "-n"]


SMK_GROUPS = _smk_groups()


@pytest.fixture(scope="module")
def dry_runs(doc_repo) -> dict[tuple, subprocess.CompletedProcess]:
    def one(item):
        key, g = item
        r = subprocess.run(_invocation(g), cwd=doc_repo, env=env(**g["env"]), capture_output=True, text=True,
                           timeout=600)
        return key, r

    with ThreadPoolExecutor(max_workers=3) as ex:
        return dict(ex.map(one, SMK_GROUPS.items()))


@pytest.mark.parametrize("key", list(SMK_GROUPS), ids=[" | ".join(g["where"])[:120] for g in SMK_GROUPS.values()])
def test_documented_snakemake_commands_dry_run(key, dry_runs):
    g, r = SMK_GROUPS[key], dry_runs[key]
    assert r.returncode == 0, (f"documented at {g['where']}: {' '.join(_invocation(g)[1:])} -> {r.returncode}\n"
                               f"{r.stdout[-2500:]}\n{r.stderr[-2500:]}")


def test_profile_runs_the_paper_config_and_submission_table_matches(dry_runs):
    """`snakemake --profile slurm all` plans config/paper.yaml; its sbatch count is the docs' table."""
    from paperflow.core.submissions import count_submissions

    key = next((k for k, g in SMK_GROUPS.items() if g["args"][:3] in (["--profile", "slurm", "all"],
                                                                        ["all", "--profile", "slurm"])
                and not g["ns"].configfile), None)
    assert key, "the docs must show `snakemake --profile slurm all`"
    out = dry_runs[key].stdout + dry_runs[key].stderr
    assert "config/paper.yaml" in out  # the profile's configfile
    local = {r for r in _local_rules()}
    table = count_submissions(dry_runs[key].stdout, local)
    total = sum(v["submissions"] for v in table.values())
    assert total <= 500, f"{total} sbatch submissions at paper scale: {table}"
    doc = (REPO / "docs" / "cluster.md").read_text()
    m = re.search(r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", doc, re.M)
    assert m, "docs/cluster.md has no submission table"
    measured = {s: v["submissions"] for s, v in table.items()}
    documented = {s: int(n) for s, n in re.findall(r"^\| (\w+) \| \d+ \| (\d+) \| \d+ \|$", doc, re.M)}
    assert (int(m.group(2)), documented) == (total, measured), (
        "docs/cluster.md's submission table is stale; regenerate with "
        "`python -m paperflow.core.submissions all --profile slurm`")


def _local_rules() -> set[str]:
    from paperflow.core.submissions import _local_rules as lr

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return lr()
    finally:
        os.chdir(cwd)


# ---- the other documented commands ---------------------------------------------------------------------
OTHER = [(w, c) for w, c in COMMANDS if _kind(_split_env(shlex.split(c))[1]) in ("dvcstage", "paperflow", "make", "dvc")]


@pytest.mark.parametrize("where,cmd", OTHER, ids=[f"{i}" for i in range(len(OTHER))])
def test_documented_tool_commands(where, cmd, doc_repo):
    e, argv = _split_env(shlex.split(cmd))
    kind = _kind(argv)
    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    if kind == "dvcstage":
        r = subprocess.run([sys.executable, *argv[1:], "--dry-run"], cwd=doc_repo, env=env(**e),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{where}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    elif kind == "paperflow":
        if argv[1] in ("studies", "config"):
            r = subprocess.run([sys.executable, "-m", "paperflow.cli", *argv[1:]], cwd=REPO, env=env(**e),
                               capture_output=True, text=True, timeout=300)
        else:
            r = subprocess.run([sys.executable, "-m", "paperflow.cli", argv[1], argv[2], "--help"], cwd=REPO,
                               env=env(**e), capture_output=True, text=True, timeout=300)
            for opt in [a.split("=")[0] for a in argv[3:] if a.startswith("--")]:
                assert opt in r.stdout, f"{where}: {opt} is not an option of `paperflow {argv[1]} {argv[2]}`"
        assert r.returncode == 0, f"{where}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    elif kind == "make":
        r = subprocess.run(["make", "-n", *argv[1:]], cwd=doc_repo, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{where}: {r.stderr}"
    else:  # dvc
        sub = argv[1]
        if sub in ("repro", "pull", "push"):
            stages = [a for a in argv[2:] if not a.startswith("-")]
            assert set(stages) <= set(dvc_yaml), f"{where}: unknown dvc stage(s) {set(stages) - set(dvc_yaml)}"
        elif sub == "exp":
            assert argv[2] == "run", f"{where}: only `dvc exp run` is documented"
            for i, a in enumerate(argv):
                if a == "-S":
                    file, _, assign = argv[i + 1].rpartition(":")
                    key = assign.split("=", 1)[0]
                    cfg = yaml.safe_load((REPO / file).read_text())
                    from paperflow.core.config import validate_config

                    cfg = validate_config(cfg, file)  # schema defaults count: the key may be implicit
                    node = cfg
                    for part in key.split("."):
                        assert isinstance(node, dict) and part in node, f"{where}: {key} is not a key of {file}"
                        node = node[part]
        else:
            pytest.fail(f"{where}: `dvc {sub}` is neither checked nor in NOT_RUN")
