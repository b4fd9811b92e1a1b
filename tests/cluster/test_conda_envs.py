"""Static check of the conda environments (conda channels are unreachable here, so the envs
cannot be built in CI; this is what we can check without building them):

- every rule that runs something has `conda:` pointing at an existing, pinned envs/*.yaml;
- each env lists every third-party package that its rules' code imports: the AST imports (also the
  lazy ones inside functions; not optional ones guarded by `try: ... except ImportError`) of the package a rule calls (`paperflow <study> ...`,
  `python -m paperflow.<module>`), followed through paperflow's own modules, plus the module-level
  imports of every study's cli.py (the `paperflow` entry point imports them all at start-up).
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PKG = SRC / "paperflow"

# conda-forge names that differ from the PyPI distribution name
CONDA_ALIASES = {"torch": {"pytorch"}, "opencv-python": {"opencv", "py-opencv"}, "tables": {"pytables"}}


def _rules():
    """(name, conda_env, shellcmd, snakefile, has_action) of every rule, from Snakemake itself."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        wf = api.workflow(resource_settings=ResourceSettings(),
                          config_settings=ConfigSettings(configfiles=[REPO / "config" / "config.yaml"]),
                          storage_settings=StorageSettings(), snakefile=REPO / "Snakefile", workdir=REPO)
        return [(r.name, r.conda_env, r.shellcmd or "", r.snakefile, not r.norun) for r in wf._workflow.rules]


RULES = _rules()


def _module_file(mod: str) -> Path | None:
    parts = mod.split(".")
    if parts[0] != "paperflow":
        return None
    base = SRC.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def _direct_imports(path: Path, top_level_only: bool) -> tuple[frozenset[str], frozenset[str]]:
    """(third-party top-level names, paperflow modules) imported by one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return _scan(tree, _module_name(path), path.name == "__init__.py", top_level_only)


def _scan(tree: ast.Module, me: str, is_init: bool, top_level_only: bool) -> tuple[frozenset[str], frozenset[str]]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:  # module level, including inside top-level if/try blocks
        stack, nodes = list(tree.body), []
        while stack:
            n = stack.pop()
            nodes.append(n)
            if isinstance(n, (ast.If, ast.Try)):
                stack.extend(n.body + n.orelse + getattr(n, "finalbody", []) +
                             [s for h in getattr(n, "handlers", []) for s in h.body])
    # imports guarded by `try: ... except ImportError` are optional dependencies: not required
    optional: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Try) and any(_catches_import_error(h.type) for h in n.handlers):
            for stmt in n.body:
                optional |= {id(x) for x in ast.walk(stmt) if isinstance(x, (ast.Import, ast.ImportFrom))}
    nodes = [n for n in nodes if id(n) not in optional]
    pkg = me if is_init else me.rsplit(".", 1)[0]
    third, ours = set(), set()

    def note(mod: str) -> None:
        if mod.split(".")[0] == "paperflow":
            ours.add(mod)
        elif mod.split(".")[0] not in sys.stdlib_module_names and mod.split(".")[0] != "__future__":
            third.add(mod.split(".")[0])

    for n in nodes:
        if isinstance(n, ast.Import):
            for a in n.names:
                note(a.name)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")
                base = base[: len(base) - (n.level - 1)]
                mod = ".".join(base + ([n.module] if n.module else []))
            else:
                mod = n.module or ""
            note(mod)
            if mod.split(".")[0] == "paperflow":
                for a in n.names:  # `from paperflow.x import submodule`
                    if _module_file(f"{mod}.{a.name}"):
                        ours.add(f"{mod}.{a.name}")
    return frozenset(third), frozenset(ours)


def _catches_import_error(t: ast.expr | None) -> bool:
    names = [t] if not isinstance(t, ast.Tuple) else list(t.elts)
    return any(isinstance(x, ast.Name) and x.id in ("ImportError", "ModuleNotFoundError") for x in names)


def _closure(start: list[Path], top_level_only: bool) -> set[str]:
    seen: set[Path] = set()
    third: set[str] = set()
    todo = list(start)
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        t, ours = _direct_imports(f, top_level_only)
        third |= t
        for m in ours:
            # importing a.b.c also runs a/__init__.py and a/b/__init__.py
            parts = m.split(".")
            for i in range(1, len(parts) + 1):
                mf = _module_file(".".join(parts[:i]))
                if mf and mf not in seen:
                    todo.append(mf)
    return third


def _entry_imports() -> set[str]:
    """What `paperflow ...` imports before any stage runs: cli.py and every study's cli module."""
    files = [PKG / "cli.py"] + sorted(PKG.glob("*/cli.py"))
    return _closure(files, top_level_only=True)


def _code_imports(shellcmd: str, snakefile: str) -> tuple[set[str], list[str]]:
    pkgs = set(re.findall(r"\bpaperflow\s+([a-z][a-z0-9_]*)\b", shellcmd))
    mods = set(re.findall(r"-m\s+(paperflow(?:\.\w+)+)", shellcmd))
    starts: list[Path] = []
    for p in pkgs:
        if (PKG / p).is_dir():
            starts += sorted((PKG / p).rglob("*.py"))
    for m in mods:
        f = _module_file(m)
        if f:
            starts.append(f)
    if not starts:  # run:/script: rules: the study of the .smk file
        study = Path(snakefile).stem
        if (PKG / study).is_dir():
            starts = sorted((PKG / study).rglob("*.py"))
    used = _closure(starts, top_level_only=False) if starts else set()
    if pkgs:
        used |= _entry_imports()
    return used, sorted(pkgs | mods)


def _env_packages(env_file: Path) -> tuple[set[str], list[str]]:
    """(normalised package names, unpinned entries) of a conda env file."""
    env = yaml.safe_load(env_file.read_text())
    names, unpinned = set(), []
    for dep in env.get("dependencies", []):
        if isinstance(dep, dict):
            for p in dep.get("pip", []):
                if p.startswith(("-e", "--", "git+", "http")) or p.startswith("."):
                    continue
                name = re.split(r"[<>=!~\[ ;]", p, maxsplit=1)[0]
                names.add(_norm(name))
                if "==" not in p:
                    unpinned.append(f"pip: {p}")
            continue
        name = re.split(r"[<>=!~ ]", str(dep), maxsplit=1)[0]
        names.add(_norm(name))
        if name != "pip" and "=" not in str(dep):
            unpinned.append(str(dep))
    return names, unpinned


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _dists_of(import_name: str) -> set[str]:
    dists = metadata.packages_distributions().get(import_name, [import_name])
    out = set()
    for d in dists:
        out.add(_norm(d))
        out |= CONDA_ALIASES.get(_norm(d), set())
    return out


ACTION_RULES = [r for r in RULES if r[4]]


def test_rules_found():
    assert len(ACTION_RULES) >= 2, "Snakemake returned no rules"


@pytest.mark.parametrize("rule", ACTION_RULES, ids=[r[0] for r in ACTION_RULES])
def test_rule_env_is_pinned_and_complete(rule):
    name, conda_env, shellcmd, snakefile, _ = rule
    assert conda_env, f"rule {name} ({Path(snakefile).name}) has no `conda:` directive"
    env_file = (Path(snakefile).parent / conda_env).resolve()
    assert env_file.is_file(), f"rule {name}: conda env {conda_env} does not exist ({env_file})"
    assert env_file.parent == REPO / "envs", f"rule {name}: env {env_file} is not under envs/"
    listed, unpinned = _env_packages(env_file)
    assert not unpinned, f"{env_file.name}: not pinned to an exact version: {unpinned}"
    used, entry = _code_imports(shellcmd, snakefile)
    missing = sorted(m for m in used if not (_dists_of(m) & listed))
    assert not missing, (f"rule {name} runs {entry or Path(snakefile).stem} whose code imports "
                         f"{missing}, but {env_file.name} lists none of "
                         f"{ {m: sorted(_dists_of(m)) for m in missing} }")


def test_import_scan_sees_lazy_imports():
    """The scan must see imports inside functions (stages import torch etc. lazily)."""
    used = _closure([PKG / "core" / "accel.py"], top_level_only=False)
    assert {"torch", "accelerate", "safetensors", "numpy"} <= used
    assert "torch" not in _closure([PKG / "core" / "accel.py"], top_level_only=True)


def test_optional_imports_are_not_required():
    src = ("import numpy\n"
           "def f():\n"
           "    import torch\n"
           "    try:\n"
           "        import lm_eval\n"
           "    except ImportError as e:\n"
           "        raise RuntimeError('optional') from e\n")
    third, _ = _scan(ast.parse(src), "paperflow.x.y", False, top_level_only=False)
    assert third == {"numpy", "torch"}
    third, _ = _scan(ast.parse(src), "paperflow.x.y", False, top_level_only=True)
    assert third == {"numpy"}
